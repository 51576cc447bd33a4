"""Talking HTTP: endpoints, kvlab's own HTTP/1.1 client (kernel stamps), SSE, responses."""
