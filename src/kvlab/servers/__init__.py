"""Server kinds: their settings, the servers they build, and the processes kvlab launches."""
