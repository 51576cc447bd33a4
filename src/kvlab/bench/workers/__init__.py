"""Load beyond one process: a point's schedule sharded over worker processes (Ray actors)."""
