"""Running and storing: the runner (public entry points), sessions, targets, run directories."""
