"""A run with what sits above its directory (:mod:`kvlab.rundir`): its experiment as a
model and a peer's file read as a run (runs), and the one evaluation of a run directory
(evaluation)."""
