"""Whether each mode's rows can be shown free of prefix reuse.

kvlab's protocol forbids prefix reuse unless an experiment asks for it
(``cache_prompt = true``): every prompt of a capacity shares its padding, so a server's
prefix cache would answer most of a prompt from memory and the row would time less
work than it claims. :func:`~kvlab.bench.analysis.validate.check_row` refuses a row
whose server reported cached prompt tokens. That check needs the count: llama.cpp and
kvlab serve always report it (``timings.cache_n``, OpenAI's
``usage.prompt_tokens_details.cached_tokens``); vLLM only when started with
``--enable-prompt-tokens-details``; many endpoints never. :func:`prefix_reuse` says, per
mode, how many measured rows carried a count, so a report can say "prefix reuse not
verifiable" instead of implying a check that was never possible.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from kvlab.bench.analysis.validate import reuse_asked
from kvlab.bench.records import Outcome, Record

ALLOWED = "reuse allowed"
VERIFIED = "verified"
NOT_VERIFIABLE = "prefix reuse not verifiable"


@dataclass(frozen=True)
class PrefixReuse:
    """One mode's measured answers (ok rows, warm-ups left out) and their cached-token
    counts. ``asked``: some row's request allowed reuse (``cache_prompt`` true)."""

    mode: str
    rows: int  # ok measured rows
    counted: int  # of them, rows whose server reported a cached-token count
    reused: int  # of them, rows with cached tokens > 0 (refused unless asked)
    asked: bool

    @property
    def status(self) -> str:
        """``reuse allowed``, ``verified`` (every row counted), or ``prefix reuse not
        verifiable`` (some row without a count)."""
        if self.asked:
            return ALLOWED
        return VERIFIED if self.counted == self.rows else NOT_VERIFIABLE

    def describe(self) -> str:
        """One line for a report."""
        if self.asked:
            return (f"{self.mode}: {ALLOWED} (cache_prompt = true); {self.reused} of "
                    f"{self.rows} rows answered partly from the server's prefix cache")
        if self.status == VERIFIED:
            return (f"{self.mode}: verified, the server counted cached prompt tokens on all "
                    f"{self.rows} rows; {self.reused} reused a prefix and were refused")
        missing = self.rows - self.counted
        return (f"{self.mode}: {NOT_VERIFIABLE} on {missing} of {self.rows} rows (the "
                "server reported no cached-token count; vLLM needs "
                "--enable-prompt-tokens-details)")

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "status": self.status}


def prefix_reuse(rows: Iterable[Record]) -> list[PrefixReuse]:
    """Per mode, in order of first appearance: the cached-token facts of its ok,
    non-warm-up rows (pass :func:`~kvlab.bench.analysis.summaries.current_rows`)."""
    found: dict[str, list[Record]] = {}
    for row in rows:
        if not row.warmup and row.outcome == Outcome.OK:
            found.setdefault(row.mode, []).append(row)
    return [PrefixReuse(mode, len(group),
                        sum(1 for r in group if r.cached_tokens is not None),
                        sum(1 for r in group if r.cached_tokens),
                        any(reuse_asked(r) for r in group))
            for mode, group in found.items()]
