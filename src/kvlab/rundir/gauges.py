"""``gauges.jsonl``: a server's ``/metrics`` read during each load point, one
:class:`GaugeSample` a line (written by :class:`kvlab.bench.client.gauges.GaugeRecorder`
through :class:`JsonlAppender`, read back by :func:`read_gauges`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kvlab.rundir.jsonl import read_jsonl


class GaugeSample(BaseModel):
    """What a server's ``/metrics`` said at one moment of a load point: the raw
    Prometheus samples (``name{labels}`` -> value), stamped on the run's clock.

    ``samples`` holds every sample of every family (a histogram's ``_bucket{le=...}``,
    ``_sum`` and ``_count``, a summary's ``{quantile=...}``), its key written as the
    exposition writes it: the name, then the labels in the server's order. ``types``
    gives each family's declared type (``counter``, ``gauge``, ``histogram``,
    ``summary``, ``unknown``) and ``timestamps`` the server's own time (seconds since
    the epoch) of the samples that carried one. A file written before kvlab kept them has
    neither; its samples read the same.

    Each point is bracketed by two samples that delimit its counters: ``phase`` "start"
    (before its first request, warm-ups done) and "end" (after its last answer, once
    the counters stopped moving). ``position`` is then the run position (a Record's
    ``position``) of the point's first request, or one past its last, so the point's
    records are exactly those with ``start.position <= position < end.position``."""

    model_config = ConfigDict(extra="forbid")

    mode: str
    capacity: int
    load: str | None  # the load point's label, e.g. "c=8"; None: the sequential rows
    t_ns: int  # run clock (ns since the run started) when the answer arrived
    samples: dict[str, float]
    types: dict[str, str] = Field(default_factory=dict)  # family name -> its TYPE
    timestamps: dict[str, float] = Field(default_factory=dict)  # sample key -> s
    phase: Literal["start", "during", "end"] = "during"
    position: int | None = None  # set on "start" and "end" samples (see above)
    # a "start" or "end" reading that failed (a timeout, a refused connection, an error
    # status): what went wrong, with ``samples`` empty; None: read
    error: str | None = None


def read_gauges(path: Path) -> list[GaugeSample]:
    """Every sample of a ``gauges.jsonl`` ([] when the file does not exist); a torn
    final line from an interrupted write is skipped."""
    return read_jsonl(path, GaugeSample)


def point_spans(gauges: Iterable[GaugeSample]) -> list[tuple[GaugeSample, GaugeSample]]:
    """Each completed point's (start, end) samples, in file order; a start without its
    end (an interrupted point) is dropped."""
    pairs: list[tuple[GaugeSample, GaugeSample]] = []
    open_spans: dict[tuple[str, int, str | None], GaugeSample] = {}
    for g in gauges:
        key = (g.mode, g.capacity, g.load)
        if g.phase == "start":
            open_spans[key] = g
        elif g.phase == "end" and key in open_spans:
            pairs.append((open_spans.pop(key), g))
    return pairs
