"""Checking the client itself: timestamp error and ingest limit against the synthetic server."""
