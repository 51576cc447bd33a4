"""What a load point's label says: its kind, its value and its repetition.

A Record's ``load`` is None for a sequential row, else ``<prefix>=<value>`` with an
optional ``#k`` for the k-th repeat of a point (a capacity search runs each rate more
than once): ``c=8`` (8 users), ``rate=4.0`` (4 requests/s), ``trace=2.0`` (a trace
replayed twice as fast), ``rate=4.0#2``, ``sessions=4`` (4 sessions at once),
``session_rate=0.5`` (a session arrival every 2 s on average).

Each kind of load point (the strategies of :mod:`kvlab.bench.plan.loads`) names its
:class:`PointKind`: the grammar of its labels and what its value means. Analysis and
reports read labels here, without importing the strategies: a label of a kind listed in
:data:`POINT_KINDS` is read with its meaning (a rate, users), in the table's order; any
other ``name=value`` label is read as a kind of that name whose value means nothing
more, listed after them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class PointKind:
    """One kind of load point as its labels show it.

    ``open_loop``: requests leave at scheduled times, so the point's achieved rate means
    something whatever its size. ``users_valued``: the value is a number of users (a
    closed loop: it has an achieved rate only when it sends more requests than users).
    ``rate_valued``: the value is a target rate in requests/s (the points a capacity
    search probes). ``axis``: what the value is, on a plot's x axis. ``whole``: values
    are whole numbers (``c=8``, not ``c=8.0``)."""

    name: str
    prefix: str
    open_loop: bool = False
    users_valued: bool = False
    rate_valued: bool = False
    axis: str = ""
    whole: bool = False

    def label(self, value: float, repetition: int = 0) -> str:
        """The label of a point of this kind at ``value`` (``repetition`` > 0: ``#k``)."""
        text = str(int(value)) if self.whole else repr(float(value))  # shortest exact
        return f"{self.prefix}={text}" + (f"#{repetition}" if repetition else "")


SEQUENTIAL = PointKind("sequential", "", axis="sequential")
CONCURRENCY = PointKind("concurrency", "c", users_valued=True, axis="concurrency", whole=True)
RATE = PointKind("rate", "rate", open_loop=True, rate_valued=True, axis="request rate (req/s)")
TRACE = PointKind("trace", "trace", open_loop=True, axis="trace")
SESSIONS = PointKind("sessions", "sessions", users_valued=True, axis="sessions at once",
                     whole=True)
SESSION_RATE = PointKind("session-rate", "session_rate", open_loop=True,
                         axis="session arrivals (sessions/s)")

POINT_KINDS: tuple[PointKind, ...] = (SEQUENTIAL, CONCURRENCY, RATE, TRACE, SESSIONS,
                                      SESSION_RATE)

_BY_PREFIX = {k.prefix: k for k in POINT_KINDS if k.prefix}
_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)=([0-9.eE+-]+)(?:#([0-9]+))?")


@dataclass(frozen=True)
class Label:
    """A label read: its kind (None: no kind of this table), value and repetition."""

    kind: PointKind | None
    value: float | None = None
    repetition: int = 0


def read_label(load: str | None) -> Label:
    """The kind, value and repetition of a row's ``load`` (None: a sequential row); a
    label that is not ``name=value[#k]`` has no kind."""
    if load is None:
        return Label(SEQUENTIAL)
    match = _LABEL.fullmatch(load)
    if match is None:
        return Label(None)
    kind = _BY_PREFIX.get(match[1]) or PointKind(match[1], match[1], axis=match[1])
    try:
        value = float(match[2])
    except ValueError:
        return Label(None)
    return Label(kind, value, int(match[3]) if match[3] else 0)


def parse_label(load: str | None) -> tuple[str, float | None]:
    """(kind name, value): ("sequential", None), ("concurrency", 8.0) for "c=8",
    ("rate", 4.0) for "rate=4.0" or "rate=4.0#2"; (the label, None) for one no kind
    knows."""
    label = read_label(load)
    if label.kind is None:
        return (str(load), None)
    return (label.kind.name, label.value)


def label_repetition(load: str | None) -> int:
    """The repetition of a load point label ("rate=4.0#2" -> 2); 0 without one."""
    return read_label(load).repetition


def load_order(load: str | None) -> tuple[int, str, float, int, str]:
    """Sort key of load labels: in the order of :data:`POINT_KINDS` (sequential first),
    each by value ("c=2" < "c=16") then repetition; other kinds after them, by name;
    labels without a kind last."""
    label = read_label(load)
    known = label.kind in POINT_KINDS
    rank = POINT_KINDS.index(label.kind) if known else len(POINT_KINDS) + (label.kind is None)
    name = "" if known or label.kind is None else label.kind.name
    return (rank, name, label.value or 0.0, label.repetition, load or "")
