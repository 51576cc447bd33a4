"""Was the client the bottleneck? Calibrated ingest limits and the saturation warning.

``kvlab calibrate`` measures how many stream events (and tokens) per second one client
process ingests before its timestamps start to lag, and saves those limits in a small
JSON file: ``$KVLAB_CALIBRATION`` if set, else ``~/.cache/kvlab/calibration.json``.
``kvlab calibrate --workers N`` measures the limit of N load workers (``kvlab run
--workers N``) and keeps it in the same file, under ``by_workers``, beside the
one-process limit. :func:`saturation_warning` compares a run's busiest second with
the limit of the client it had: a run whose client ingested near its limit measured
the client as much as the server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kvlab.rundir import Record

DEFAULT_THRESHOLD = 0.7  # fraction of the calibrated limit that triggers the warning
DEFAULT_WINDOW_S = 1.0


@dataclass(frozen=True)
class Calibration:
    """Ingest limits of one client process on one machine.

    ``max_events_per_s`` / ``max_tokens_per_s``: the highest rate at which the client's
    timestamps still matched the server's send times (see ``kvlab calibrate``).
    ``measured_at`` is an ISO time, ``host`` the machine's name. ``workers``: the
    number of load workers it was measured with (``kvlab calibrate --workers N``);
    None: one client process.
    """

    max_events_per_s: float
    max_tokens_per_s: float
    measured_at: str = ""
    host: str = ""
    kvlab_version: str = ""
    workers: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        workers = data.get("workers")
        return cls(
            max_events_per_s=float(data["max_events_per_s"]),
            max_tokens_per_s=float(data["max_tokens_per_s"]),
            measured_at=str(data.get("measured_at", "")),
            host=str(data.get("host", "")),
            kvlab_version=str(data.get("kvlab_version", "")),
            workers=int(workers) if workers is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def client(self) -> str:
        """Whose limit this is, in words."""
        if self.workers is None:
            return "this machine's client"
        return f"{self.workers} load worker{'s' * (self.workers != 1)} on this machine"


def calibration_path() -> Path:
    """Where the calibration lives: ``$KVLAB_CALIBRATION`` or ~/.cache/kvlab/calibration.json."""
    env = os.environ.get("KVLAB_CALIBRATION")
    return Path(env) if env else Path.home() / ".cache" / "kvlab" / "calibration.json"


def _saved(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_calibration(calibration: Calibration, path: Path | None = None) -> Path:
    """Write the limits as JSON (a one-process limit at the top, a limit of N workers
    under ``by_workers``; the other limits in the file are kept); return the path."""
    target = Path(path) if path is not None else calibration_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    data = _saved(target)
    saved = data.get("by_workers")
    by_workers: dict[str, Any] = saved if isinstance(saved, dict) else {}
    if calibration.workers is None:
        data = calibration.to_dict()
    else:
        by_workers = {**by_workers, str(calibration.workers): calibration.to_dict()}
    if by_workers:
        data["by_workers"] = by_workers
    target.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return target


def load_calibration(path: Path | None = None, workers: int | None = None
                     ) -> Calibration | None:
    """The saved limits of one client process, or (``workers``) of that many load
    workers; None when the file holds none (or cannot be read)."""
    data: Any = _saved(Path(path) if path is not None else calibration_path())
    if workers is not None:
        by_workers = data.get("by_workers")
        data = by_workers.get(str(workers)) if isinstance(by_workers, dict) else None
    try:
        return Calibration.from_dict(data) if isinstance(data, dict) and data else None
    except (ValueError, KeyError, TypeError):
        return None


def busiest_rate(
    records: Iterable[Record], window_s: float = DEFAULT_WINDOW_S
) -> tuple[float, float]:
    """(events/s, tokens/s) the client ingested in its busiest ``window_s`` window.

    Events are the stream chunks of every record (``chunk_ns``); a chunk whose token
    count is unknown counts as one token. Warm-ups are included: they loaded the client too.
    """
    times: list[int] = []
    tokens: list[int] = []
    for record in records:
        times.extend(record.chunk_ns)
        if len(record.chunk_tokens) == len(record.chunk_ns):
            tokens.extend(1 if n is None else n for n in record.chunk_tokens)
        else:  # counts not kept (a hand-made or older record): one token per chunk
            tokens.extend([1] * len(record.chunk_ns))
    if not times:
        return 0.0, 0.0
    order = np.argsort(np.asarray(times, dtype=np.int64), kind="stable")
    t = np.asarray(times, dtype=np.int64)[order]
    cum = np.concatenate(([0], np.cumsum(np.asarray(tokens, dtype=np.int64)[order])))
    window_ns = int(window_s * 1e9)
    ends = np.searchsorted(t, t + window_ns, side="left")  # window [t_i, t_i + w)
    starts = np.arange(len(t))
    events = int((ends - starts).max())
    toks = int((cum[ends] - cum[starts]).max())
    return events / window_s, toks / window_s


@dataclass(frozen=True)
class ClientCheck:
    """Did the run's load come near the client's limit? One line for every report.

    ``status``: ``"saturated"`` (over the threshold: the warning), ``"ok"`` (below it)
    or ``"uncalibrated"`` (no limit known for this machine: nobody can tell).
    """

    status: str
    text: str

    @property
    def warning(self) -> bool:
        return self.status == "saturated"


@dataclass(frozen=True)
class ReadLag:
    """How long reads waited for the client's event loop (kernel-stamped reads), in ms.

    ``typical``/``worst``: median/max over requests of each request's longest wait;
    ``gap``: median gap between successive content chunks of a stream.
    """

    typical: float
    worst: float
    gap: float


def read_lag(records: Iterable[Record]) -> ReadLag | None:
    """The run's :class:`ReadLag`; None when no record has kernel stamps."""
    lags: list[int] = []
    gaps: list[np.ndarray] = []
    for record in records:
        if record.read_lag_ns is None:
            continue
        lags.append(record.read_lag_ns)
        if len(record.chunk_ns) > 1:
            gaps.append(np.diff(np.asarray(record.chunk_ns, dtype=np.int64)))
    if not lags:
        return None
    gap = float(np.median(np.concatenate(gaps))) / 1e6 if gaps else float("inf")
    return ReadLag(float(np.median(lags)) / 1e6, max(lags) / 1e6, gap)


def client_check(
    records: Iterable[Record],
    calibration: Calibration | Mapping[str, Any] | None,
    threshold: float = DEFAULT_THRESHOLD,
    window_s: float = DEFAULT_WINDOW_S,
    workers: int | None = None,
) -> ClientCheck:
    """Was the client near its limit? Two kinds of evidence, either one warns:

    - the run's busiest ``window_s`` of ingest against the calibrated limit of the
      client it had: one process, or (``workers``) that many load workers; a limit
      measured with another client is not compared with;
    - the run's own read lag (kernel-stamped reads): when a typical request's longest
      wait for the loop is longer than the typical gap between events, events of one
      stream will have merged into one read and share its (later) stamp.
    """
    records = list(records)
    events_s, _tokens = busiest_rate(records, window_s)
    lag = read_lag(records)
    try:
        cal = (calibration if isinstance(calibration, Calibration) or calibration is None
               else Calibration.from_dict(calibration))
    except (KeyError, TypeError, ValueError):
        cal = None  # an unreadable calibration counts as none
    if cal is not None and cal.workers != workers:
        cal = None  # another client's limit says nothing about this one
    lag_text = ""
    if lag is not None:
        if lag.typical > lag.gap:
            return ClientCheck("saturated", (
                f"client near saturation: a typical request's longest wait for the event "
                f"loop was {lag.typical:.2f} ms (worst {lag.worst:.2f} ms), longer than the "
                f"{lag.gap:.2f} ms median gap between events, so events of one stream "
                "merged into one read and share its later timestamp - use fewer streams "
                "or more client processes"))
        lag_text = (f"; its reads waited up to {lag.typical:.2f} ms for its loop in a typical "
                    f"request (worst {lag.worst:.2f} ms) against a {lag.gap:.2f} ms median "
                    "event gap, waits the timestamps (kernel arrival times) do not include")
    if cal is None:
        whose, how = (("this machine", "kvlab calibrate") if workers is None else
                      (f"{workers} load workers on this machine",
                       f"kvlab calibrate --workers {workers}"))
        return ClientCheck("ok" if lag is not None else "uncalibrated", (
            f"client load: {events_s:,.0f} events/s at its busiest {window_s:g} s{lag_text}; "
            f"no calibrated limit for {whose} to compare with (run {how} once, then kvlab "
            "evaluate this run)"))
    warning = saturation_warning(records, cal, threshold, window_s)
    if warning is not None:
        return ClientCheck("saturated", warning)
    share = events_s / cal.max_events_per_s if cal.max_events_per_s > 0 else 0.0
    when = f" (calibrated {cal.measured_at})" if cal.measured_at else ""
    return ClientCheck("ok", (
        f"client load: {events_s:,.0f} events/s at its busiest {window_s:g} s, {share:.0%} "
        f"of the {cal.max_events_per_s:,.0f} events/s {cal.client} handle"
        f"{'s' * (cal.workers is None)} on time{when}{lag_text}: the client was not the "
        "limit"))


def saturation_warning(
    records: Iterable[Record],
    calibration: Calibration | Mapping[str, Any] | None,
    threshold: float = DEFAULT_THRESHOLD,
    window_s: float = DEFAULT_WINDOW_S,
) -> str | None:
    """A one-line warning if the client ingested > ``threshold`` of its calibrated limit.

    Returns None when the run stayed below (or no calibration is given). The rate is
    taken over the busiest ``window_s`` window of the run, for events and for tokens.
    """
    if calibration is None:
        return None
    cal = (
        calibration
        if isinstance(calibration, Calibration)
        else Calibration.from_dict(calibration)
    )
    events_s, tokens_s = busiest_rate(records, window_s)
    worst = max(
        (events_s / cal.max_events_per_s if cal.max_events_per_s > 0 else 0.0, "events", events_s,
         cal.max_events_per_s),
        (tokens_s / cal.max_tokens_per_s if cal.max_tokens_per_s > 0 else 0.0, "tokens", tokens_s,
         cal.max_tokens_per_s),
    )
    share, what, rate, limit = worst
    if share <= threshold:
        return None
    how = "kvlab calibrate" + (f" --workers {cal.workers}" if cal.workers else "")
    return (
        f"client near saturation: it ingested {rate:,.0f} {what}/s in its busiest "
        f"{window_s:g} s, {share:.0%} of the {limit:,.0f} {what}/s {cal.client} "
        f"handle{'s' * (cal.workers is None)} before its timestamps lag ({how}); latencies "
        f"of this run include client delay - use fewer streams or more client processes"
    )
