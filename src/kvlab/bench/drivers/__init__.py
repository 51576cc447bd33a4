"""Load drivers: how a run's requests are sent (in this process, over Ray workers, or in
memory for tests), one file each behind the interface (driver) and the registry (kinds)."""
