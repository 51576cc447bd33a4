"""The one gate between records and numbers: :class:`ValidRows`, made only by :func:`judge`.

Every aggregate kvlab reports (summaries, load figures and goodput, the capacity search,
comparisons, the CI gate, CSV files and the results page) takes a ``ValidRows``, never a
list of records, so no figure can be fed a row validation refused. :func:`judge` is the
only maker: it takes a run's current rows (:func:`current_rows`), refuses rows by the
row checks (:func:`~kvlab.analysis.validate.check_row`) and by the point verdicts
of the server's own counters (:mod:`~kvlab.analysis.point_verdicts`), and keeps
the accepted rows beside every row it judged. A ValidRows of a run splits into the
ValidRows of each (mode, capacity, load) cell (:meth:`ValidRows.groups`), each saying
what its figures stand on: "n valid of m", the refused rows by class and the point
flags (:class:`RowCount`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvlab.analysis.point_verdicts import PointVerdict
from kvlab.analysis.validate import Reason, Violation, check_row
from kvlab.labels import load_order
from kvlab.rundir import Record

GroupKey = tuple[str, int, str | None]  # (mode, capacity, load)


@dataclass(frozen=True)
class CellPlan:
    """What a run planned for one (mode, capacity, load) cell: ``rows`` (None: unknown,
    e.g. a point sent for a duration) and whether the cell completed."""

    rows: int | None
    finished: bool = True
_JUDGE = object()  # only judge() and ValidRows' own views pass it


def current_rows(records: Iterable[Record]) -> list[Record]:
    """The latest record per key: a row retried by ``--resume`` supersedes the earlier
    failed attempt (both stay in records.jsonl). Warm-ups are dropped."""
    latest: dict[tuple[Any, ...], Record] = {}
    for record in records:
        if not record.warmup:
            latest[record.key] = record
    return sorted(latest.values(), key=lambda r: r.position)


@dataclass(frozen=True)
class RowCount:
    """What a figure stands on: ``valid`` rows of ``measured``, the refused ones by class
    (each refused row under its first reason, so they sum to measured - valid) and the
    point flags of its rows (a counter that disagrees with the records).

    ``planned``: the rows the run's plan had for these cells (None: unknown, e.g. a
    peer's file or an older run), so "n valid of m" reads m from the plan;
    ``finished``: False when a point (or a cell's rows) did not complete."""

    valid: int
    measured: int
    refused: dict[str, int] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    planned: int | None = None
    finished: bool = True

    @property
    def of(self) -> int:
        """The m of "n valid of m": the rows planned when known, else those measured."""
        return self.planned if self.planned is not None else self.measured

    @property
    def share(self) -> float | None:
        """valid / m (rows planned when known, else measured); None without a row."""
        return self.valid / self.of if self.of else None

    @property
    def refused_share(self) -> float | None:
        """1 - share; None without a measured row."""
        return None if self.share is None else 1.0 - self.share

    def refused_text(self) -> str:
        """``2 failed, 1 output_tokens``, or ``none``."""
        return ", ".join(f"{n} {reason}" for reason, n in self.refused.items()) or "none"

    def describe(self, flags: bool = True) -> str:
        """``14 valid of 16 (refused: 2 output_tokens)``, and the flags (``flags``
        False: only how many)."""
        line = f"{self.valid} valid of {self.of}"
        if self.planned is not None and self.planned != self.measured:
            line += f" planned ({self.measured} sent)"
        if not self.finished:
            line += ", not finished"
        if self.refused:
            line += f" (refused: {self.refused_text()})"
        if self.flags and flags:
            line += "; flagged: " + "; ".join(self.flags)
        elif self.flags:
            line += f"; {len(self.flags)} point flag{'s' if len(self.flags) > 1 else ''}"
        return line

    def to_dict(self) -> dict[str, Any]:
        """evaluation.json's count: ``planned`` and ``finished`` once a plan is known."""
        data: dict[str, Any] = {"valid": self.valid, "measured": self.measured,
                                "refused": dict(self.refused), "flags": list(self.flags)}
        if self.planned is not None or not self.finished:
            data |= {"planned": self.planned, "finished": self.finished}
        return data

    @classmethod
    def total(cls, counts: Iterable[RowCount]) -> RowCount:
        """The count of several groups pooled."""
        valid = measured = 0
        planned: int | None = 0
        finished = True
        refused: Counter[str] = Counter()
        flags: dict[str, None] = {}
        for c in counts:
            valid, measured = valid + c.valid, measured + c.measured
            planned = None if planned is None or c.planned is None else planned + c.planned
            finished = finished and c.finished
            refused.update(c.refused)
            flags.update(dict.fromkeys(c.flags))
        return cls(valid, measured, dict(refused.most_common()), tuple(flags),
                   planned if measured or planned else None, finished)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RowCount:
        """A count as evaluation.json holds it."""
        planned = data.get("planned")
        return cls(int(data["valid"]), int(data["measured"]), dict(data.get("refused") or {}),
                   tuple(data.get("flags") or ()), None if planned is None else int(planned),
                   bool(data.get("finished", True)))


@dataclass(frozen=True, eq=False)
class ValidRows:
    """Rows validation accepted, and every row it judged.

    ``rows``: the accepted rows, in run order: the only rows a figure of work done may
    read. ``sent``: every measured row judged, accepted and refused, in run order: only
    for facts of the load offered (when requests left, how many were in flight, a
    point's span), never for a figure of work done. ``violations``: why each refused
    row was refused (row checks and point verdicts). ``verdicts``: the point verdicts
    that concern these rows (refusals and flags). Made only by :func:`judge`."""

    rows: tuple[Record, ...]
    sent: tuple[Record, ...]
    violations: tuple[Violation, ...]
    verdicts: tuple[PointVerdict, ...] = ()
    _by: object = field(default=None, repr=False)
    plan: dict[GroupKey, CellPlan] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self._by is not _JUDGE:
            raise TypeError("ValidRows are made by kvlab.analysis.valid_rows.judge "
                            "only: validate the records first")

    @property
    def count(self) -> RowCount:
        """n valid of m, the refused rows by their first reason, and the flags."""
        first: dict[tuple[Any, ...], str] = {}
        for v in self.violations:
            first.setdefault(v.row_key, str(v.reason))
        by = Counter(first.values())
        flags = tuple(dict.fromkeys(v.describe() for v in self.verdicts if not v.refuses))
        planned: int | None = None
        finished = True
        if self.plan:
            cells = {(r.mode, r.capacity, r.load) for r in self.sent}
            plans = [self.plan.get(k) for k in cells]
            finished = all(p is None or p.finished for p in plans)
            if plans and all(p is not None and p.rows is not None for p in plans):
                planned = sum(p.rows for p in plans if p is not None and p.rows is not None)
        return RowCount(len(self.rows), len(self.sent), dict(by.most_common()), flags,
                        planned, finished)

    @property
    def flagged(self) -> bool:
        """True when a point verdict flags some of these rows without refusing them."""
        return any(not v.refuses for v in self.verdicts)

    def groups(self) -> dict[GroupKey, ValidRows]:
        """One ValidRows per (mode, capacity, load) measured, in report order: capacity,
        then load (sequential first), then mode in order of first appearance."""
        by: dict[GroupKey, list[Record]] = {}
        mode_order: dict[str, int] = {}
        for r in self.sent:
            mode_order.setdefault(r.mode, len(mode_order))
            by.setdefault((r.mode, r.capacity, r.load), []).append(r)
        order = sorted(by, key=lambda k: (k[1], load_order(k[2]), mode_order[k[0]]))
        return {k: self._subset(by[k]) for k in order}

    def modes(self) -> list[str]:
        """Mode names in order of first appearance."""
        return list(dict.fromkeys(r.mode for r in self.sent))

    def _subset(self, sent: list[Record]) -> ValidRows:
        ids = {id(r) for r in sent}
        keys = {_row_key(r) for r in sent}
        return ValidRows(
            tuple(r for r in self.rows if id(r) in ids), tuple(sent),
            tuple(v for v in self.violations if v.row_key in keys),
            tuple(v for v in self.verdicts if any(v.covers(r) for r in sent)), _JUDGE,
            self.plan)


def _row_key(row: Record) -> tuple[str, int, str, int, str | None]:
    return (row.mode, row.capacity, row.query_id, row.repetition, row.load)


def _ended_sessions(rows: Sequence[Record], refused: set[int]) -> list[Violation]:
    """A session's turn sent after one of its turns was refused (its history is not one
    the user asked for: a session ends at a refused turn) is refused too."""
    ended: dict[tuple[Any, ...], Record] = {}
    for r in sorted((r for r in rows if r.session is not None and id(r) in refused),
                    key=lambda r: r.t_end):
        ended.setdefault((r.mode, r.capacity, r.load, r.repetition, r.session), r)
    out = []
    for r in rows:
        first = ended.get((r.mode, r.capacity, r.load, r.repetition, r.session))
        if first is not None and id(r) not in refused and r.t_sent >= first.t_end:
            out.append(Violation(r.mode, r.capacity, r.query_id, r.repetition,
                                 Reason.SESSION_ENDED, f"sent after {first.query_id}, a "
                                 "refused turn of its session", load=r.load))
    return out


def judge(records: Iterable[Record], verdicts: Sequence[PointVerdict] = (),
          plan: Mapping[GroupKey, CellPlan] | None = None) -> ValidRows:
    """Validate a run's records: its current rows (:func:`current_rows`), each refused
    when a row check fails or a refusing point verdict covers it, or when it is a
    session's turn sent after a refused turn of its session. ``verdicts``: the point
    verdicts of the server's counters (none: rows judged on their own facts).
    ``plan``: each cell's planned rows and completion (counts then read "of m planned")."""
    rows = current_rows(records)
    violations: list[Violation] = []
    refused: set[int] = set()
    for row in rows:
        found = check_row(row)
        found += [v.violation(row) for v in verdicts if v.refuses and v.covers(row)]
        violations += found
        if found:
            refused.add(id(row))
    after = _ended_sessions(rows, refused)
    violations += after
    late = {(v.query_id, v.repetition, v.mode, v.capacity, v.load) for v in after}
    accepted = [r for r in rows if id(r) not in refused
                and (r.query_id, r.repetition, r.mode, r.capacity, r.load) not in late]
    concern = tuple(v for v in verdicts if any(v.covers(r) for r in rows))
    return ValidRows(tuple(accepted), tuple(rows), tuple(violations), concern, _JUDGE,
                     dict(plan or {}))
