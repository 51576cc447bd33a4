"""Running and storing: the runner (public entry points), invocations, targets, run directories."""
