"""Load point labels: what a row's ``load`` says ("c=8", "rate=4.0#2", "trace=2.0") and
the order reports list them in."""

from __future__ import annotations

import re

_LABEL = re.compile(r"(c|rate|trace)=([0-9.eE+-]+)(?:#([0-9]+))?")
_RANK = {"sequential": 0, "concurrency": 1, "rate": 2, "trace": 3}


def parse_label(load: str | None) -> tuple[str, float | None]:
    """("sequential", None), ("concurrency", 8.0) for "c=8", ("rate", 4.0) for "rate=4.0"
    or "rate=4.0#2" (the second repetition of a capacity search's point), ("trace", 2.0)
    for "trace=2.0" (a trace replayed twice as fast)."""
    if load is None:
        return ("sequential", None)
    match = _LABEL.fullmatch(load)
    if not match:
        return (load, None)
    kind = {"c": "concurrency"}.get(match[1], match[1])
    return (kind, float(match[2]))


def label_repetition(load: str | None) -> int:
    """The repetition of a load point label ("rate=4.0#2" -> 2); 0 without one."""
    match = _LABEL.fullmatch(load or "")
    return int(match[3]) if match and match[3] else 0


def load_order(load: str | None) -> tuple[int, float, int, str]:
    """Sort key of load labels: sequential first, then concurrency, rate and trace
    points, each by value ("c=2" < "c=16") then repetition; unknown labels last."""
    kind, value = parse_label(load)
    return (_RANK.get(kind, len(_RANK)), value or 0.0, label_repetition(load), load or "")
