"""Launch and stop inference servers, one mode after another."""
