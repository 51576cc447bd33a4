"""The slowest valid row of each (mode, capacity, load): which query, and its e2e (ms)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvlab.analysis.check import Judged
from kvlab.analysis.metrics import e2e_ms


@dataclass(frozen=True)
class Slowest:
    """The slowest valid row of one group."""

    mode: str
    capacity: int
    load: str | None
    query_id: str
    e2e_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "capacity": self.capacity, "load": self.load,
                "query_id": self.query_id, "e2e_ms": self.e2e_ms}


@dataclass(frozen=True)
class SlowestCheck:
    """Per group, its slowest valid row."""

    key: str = "slowest"

    def run(self, judged: Judged) -> list[Slowest]:
        out = []
        for (mode, capacity, load), group in judged.valid.groups().items():
            if group.rows:
                worst = max(group.rows, key=e2e_ms)
                out.append(Slowest(mode, capacity, load, worst.query_id, e2e_ms(worst)))
        return out

    def not_measured(self, judged: Judged) -> list[str]:
        return []  # the client's own clock: every server kind
