"""A run directory on disk: its typed state, the one reader, the one writer, its evaluation."""
