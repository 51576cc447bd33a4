"""Load strategies: one file per kind of ``[load]``, the interface (base) and the
registry (kinds)."""
