"""The benchmark harness: requests, records, validation, metrics, statistics."""
