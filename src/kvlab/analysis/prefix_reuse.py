"""Whether each mode's rows can be shown free of prefix reuse.

kvlab's protocol forbids prefix reuse unless an experiment asks for it
(``cache_prompt = true``): every prompt of a capacity shares its padding, so a server's
prefix cache would answer most of a prompt from memory and the row would time less
work than it claims. :func:`~kvlab.analysis.validate.check_row` refuses a row
whose server reported cached prompt tokens. That check needs the count: llama.cpp and
kvlab serve always report it (``timings.cache_n``, OpenAI's
``usage.prompt_tokens_details.cached_tokens``); vLLM only when started with
``--enable-prompt-tokens-details`` (no request field asks for it); many endpoints
never. Where rows carry no count, the server's own prefix-cache counter can still
vouch for them: a Δ of 0 prefix-cache hits over the points that hold them
(:mod:`kvlab.analysis.server_counters`); a Δ above 0 refuses those points, rows
counted or not (:mod:`kvlab.analysis.point_verdicts`). :func:`prefix_reuse` says,
per mode, which held, so a report says "prefix reuse not verifiable" instead of
implying a check that was never possible.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from kvlab.analysis.server_counters import PointCounters
from kvlab.analysis.validate import reuse_asked
from kvlab.rundir import Outcome, Record

ALLOWED = "reuse allowed"
VERIFIED = "verified"
VERIFIED_BY_METRICS = "verified by /metrics"
REFUSED_BY_METRICS = "refused by /metrics"
NOT_VERIFIABLE = "prefix reuse not verifiable"


@dataclass(frozen=True)
class PrefixReuse:
    """One mode's measured answers (ok rows, warm-ups left out) and what vouches for
    them. ``asked``: some row's request allowed reuse (``cache_prompt`` true)."""

    mode: str
    rows: int  # ok measured rows
    counted: int  # of them, rows whose server reported a cached-token count
    reused: int  # of them, rows with cached tokens > 0 (refused unless asked)
    asked: bool
    covered: int = 0  # of them, rows inside points with a prefix-cache hits counter
    metrics_hits: float | None = None  # Δ prefix-cache hits over those points

    @property
    def status(self) -> str:
        """``reuse allowed``, ``refused by /metrics`` (its server counted prefix-cache
        hits: those points are refused), ``verified`` (every row counted),
        ``verified by /metrics`` (every row in a point with 0 prefix-cache hits), or
        ``prefix reuse not verifiable``."""
        if self.asked:
            return ALLOWED
        if self.metrics_hits:
            return REFUSED_BY_METRICS
        if self.counted == self.rows:
            return VERIFIED
        if self.covered == self.rows and self.metrics_hits == 0:
            return VERIFIED_BY_METRICS
        return NOT_VERIFIABLE

    def describe(self) -> str:
        """One line for a report."""
        status = self.status
        if status == ALLOWED:
            return (f"{self.mode}: {ALLOWED} (cache_prompt = true); {self.reused} of "
                    f"{self.rows} rows answered partly from the server's prefix cache")
        if status == REFUSED_BY_METRICS:
            return (f"{self.mode}: {REFUSED_BY_METRICS}, its server counted "
                    f"{self.metrics_hits:g} prefix-cache hit tokens over the points of "
                    f"{self.covered} of its {self.rows} rows under cache_prompt = false; "
                    "those points are refused as prefix_reuse (Validation names each)")
        if status == VERIFIED:
            refused = (f"{self.reused} reused a prefix and were refused" if self.reused
                       else "none reused a prefix")
            return (f"{self.mode}: verified, the server counted cached prompt tokens on all "
                    f"{self.rows} rows; {refused}")
        if status == VERIFIED_BY_METRICS:
            return (f"{self.mode}: {VERIFIED_BY_METRICS}, no row carried a cached-token "
                    f"count but the server's prefix cache hit 0 tokens over the points of "
                    f"all {self.rows} rows")
        return (f"{self.mode}: {NOT_VERIFIABLE} on {self.rows - self.counted} of "
                f"{self.rows} rows (the server reported no cached-token count; vLLM needs "
                "--enable-prompt-tokens-details)")

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "status": self.status}


def prefix_reuse(rows: Iterable[Record], points: Sequence[PointCounters] = ()
                 ) -> list[PrefixReuse]:
    """Per mode, in order of first appearance: the cached-token facts of its ok,
    non-warm-up generation rows (pass :func:`~kvlab.analysis.summaries.current_rows`), and
    the prefix-cache hits of the ``points`` that hold them."""
    found: dict[str, list[Record]] = {}
    for row in rows:  # embeddings rows (inputs) state no cached tokens: not judged here
        if not row.warmup and row.outcome == Outcome.OK and row.inputs is None:
            found.setdefault(row.mode, []).append(row)
    out = []
    for mode, group in found.items():
        with_hits = [p for p in points if p.mode == mode
                     and p.deltas["prefix_cache_hits"] is not None]
        covered = sum(1 for r in group if any(p.covers(r) for p in with_hits))
        holding = [p for p in with_hits if any(p.covers(r) for r in group)]
        hits = sum(p.deltas["prefix_cache_hits"] or 0.0 for p in holding) if holding else None
        out.append(PrefixReuse(mode, len(group),
                               sum(1 for r in group if r.cached_tokens is not None),
                               sum(1 for r in group if r.cached_tokens),
                               any(reuse_asked(r) for r in group), covered, hits))
    return out
