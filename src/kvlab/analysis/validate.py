"""Validation before aggregation: rows and pairs an aggregate must refuse.

Validation never deletes anything: it returns :class:`Violation` objects that name
the row (mode, capacity, query, repetition) and the reason. A row the server answered
partly from its prefix cache (``cached_tokens > 0``) when its request did not allow
reuse (``cache_prompt`` not true) measured less work than it claims: it is refused as
``prefix_reuse``. A whole load point can be refused too, by the server's own counters
(:mod:`kvlab.analysis.point_verdicts`). :func:`kvlab.analysis.valid_rows.judge`
applies both and is the only way rows reach an aggregate; comparisons refuse a pair of
modes whose prompts differ.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum

from kvlab.analysis.metrics import e2e_ms
from kvlab.rundir import Outcome, Record


class Reason(StrEnum):
    """Why a row or a pair was refused."""

    FAILED = "failed"  # no answer: an http error, a timeout, a refused connection
    MALFORMED = "malformed"  # an answer (body or event) that breaks its API
    WRONG_API = "wrong_api"  # an answer in another API's shape than the one asked
    STREAM_CUT = "stream_cut"  # a stream that started and ended before its terminator
    VECTORS = "vectors"  # embeddings: not one finite vector of the right length per input
    OUTPUT_TOKENS = "output_tokens"  # server-counted output differs from the request
    TRUNCATED = "truncated"  # the server truncated the prompt
    DURATION = "duration"  # non-positive end-to-end duration
    NO_TERMINATOR = "no_terminator"  # stream ended without [DONE] / final stop:true
    NO_USAGE = "no_usage"  # stream without its usage / final counts
    PREFIX_REUSE = "prefix_reuse"  # cached prompt tokens under cache_prompt = false
    COUNTERS_DIFFER = "counters_differ"  # /metrics deltas disagree with the records (--strict)
    COUNTERS_UNREAD = "counters_unread"  # the point's /metrics read failed (--strict)
    CLIENT_ERROR = "client_error"  # the client's own error over its budget share (--strict)
    SESSION_ENDED = "session_ended"  # sent after a refused turn of its session
    PROMPT_DIFFERS = "prompt_differs"  # same query and capacity, different prompt text
    PROMPT_TOKENS_DIFFER = "prompt_tokens_differ"  # different server-counted prompt tokens
    MISSING_PAIR = "missing_pair"  # a query measured in one mode only


@dataclass(frozen=True)
class Violation:
    """One refused row (or pair, when ``other_mode`` is set), with a readable detail."""

    mode: str
    capacity: int
    query_id: str
    repetition: int
    reason: Reason
    detail: str
    other_mode: str | None = None
    load: str | None = None  # the row's load point ("c=8", "rate=4.0"); None: sequential

    @property
    def row_key(self) -> tuple[str, int, str, int, str | None]:
        """The refused row: (mode, capacity, query, repetition, load)."""
        return (self.mode, self.capacity, self.query_id, self.repetition, self.load)

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["reason"] = str(self.reason)
        return data

    def __str__(self) -> str:
        who = self.mode if self.other_mode is None else f"{self.mode} vs {self.other_mode}"
        at = f"{self.capacity} {self.load}" if self.load else str(self.capacity)
        return (
            f"{who} @ {at} {self.query_id} rep {self.repetition}: "
            f"{self.reason}: {self.detail}"
        )


def _violation(row: Record, reason: Reason, detail: str) -> Violation:
    return Violation(row.mode, row.capacity, row.query_id, row.repetition, reason, detail,
                     load=row.load)


def check_row(row: Record) -> list[Violation]:
    """Every reason to refuse ``row``; empty if it may be aggregated."""
    if row.outcome != Outcome.OK:
        status = f" {row.http_status}" if row.http_status is not None else ""
        error = f": {row.error}" if row.error else ""
        cut = "; " + "; ".join(row.notes) if row.notes else ""
        return [_violation(row, failure_reason(row), f"{row.outcome}{status}{error}{cut}")]
    if row.inputs is not None:  # an embeddings request: its vectors, not its tokens
        return [_violation(row, Reason.VECTORS, why) for why in vector_problems(row)] + \
            ([_violation(row, Reason.DURATION, f"e2e {e2e_ms(row):.3f} ms")]
             if e2e_ms(row) <= 0 else [])
    found: list[Violation] = []
    if row.output_tokens != row.requested_tokens:
        found.append(
            _violation(
                row,
                Reason.OUTPUT_TOKENS,
                f"{row.output_tokens} output tokens, {row.requested_tokens} requested",
            )
        )
    if row.truncated:
        found.append(_violation(row, Reason.TRUNCATED, "the server truncated the prompt"))
    if e2e_ms(row) <= 0:
        found.append(_violation(row, Reason.DURATION, f"e2e {e2e_ms(row):.3f} ms"))
    # An imported row (peers) was judged complete by its tool, which keeps no
    # terminator fact; every other check still applies to it.
    if row.stream and row.saw_terminator is not True and row.imported_from is None:
        found.append(_violation(row, Reason.NO_TERMINATOR, "the stream ended without its end"))
    # saw_usage None means "not applicable to this API/settings"; False means missing.
    if row.stream and row.saw_usage is False:
        found.append(_violation(row, Reason.NO_USAGE, "the stream carried no usage"))
    if row.cached_tokens and not reuse_asked(row):
        found.append(_violation(
            row, Reason.PREFIX_REUSE,
            f"the server answered {row.cached_tokens} of {row.prompt_tokens} prompt tokens "
            "from its prefix cache under cache_prompt = false (start it with prefix "
            "caching off, or send a per-request salt: protocol.cache_salt)"))
    return found


def failure_reason(row: Record) -> Reason:
    """The class of a failed row: an answer that broke its API, one of another API, a
    stream cut after it started (what it had sent is kept), or no answer at all."""
    if row.outcome == Outcome.MALFORMED:
        return Reason.MALFORMED
    if row.outcome == Outcome.WRONG_API:
        return Reason.WRONG_API
    if row.outcome == Outcome.DISCONNECTED and row.stream and row.t_first_chunk is not None:
        return Reason.STREAM_CUT
    return Reason.FAILED


def vector_problems(row: Record) -> list[str]:
    """Why an embeddings row's answer is not one finite vector of the expected length
    per input (empty: it is)."""
    out = []
    if row.vectors != row.inputs:
        out.append(f"{row.vectors} vectors for {row.inputs} inputs")
    dims = row.dimensions or []
    if len(dims) > 1:
        out.append(f"vectors of different lengths {dims}")
    elif dims and row.dimension_expected is not None and dims[0] != row.dimension_expected:
        out.append(f"vectors of {dims[0]} values, {row.dimension_expected} expected (the "
                   "request's dimensions, else the width the server declares)")
    if row.non_finite:
        out.append(f"{row.non_finite} values are not finite numbers (NaN, infinite or null)")
    return out


def refusal(row: Record) -> str | None:
    """Why validation refuses ``row`` (its first reason and detail), None when it may be
    aggregated: what ends a session at the turn it refuses (bench.plan.sessions)."""
    found = check_row(row)
    return f"{found[0].reason}: {found[0].detail}" if found else None


def reuse_asked(row: Record) -> bool:
    """True when the row's request allowed prefix reuse (``cache_prompt: true`` in its
    body); kvlab's protocol sends false unless the experiment asks for reuse."""
    return row.body.get("cache_prompt") is True


def check_rows(rows: Iterable[Record]) -> list[Violation]:
    """Violations of every non-warm-up row, in input order."""
    return [v for row in rows if not row.warmup for v in check_row(row)]


def check_pairs(
    mode_a: str, rows_a: Iterable[Record], mode_b: str, rows_b: Iterable[Record]
) -> list[Violation]:
    """Refusals for comparing two modes at one capacity (and one load point): prompts
    must match row by row.

    Rows are matched on (query, repetition). Each pair must have the same prompt
    SHA-256 and the same server-counted prompt tokens where both rows have a count (a
    failed request has none: it is refused as a row, not as a different prompt); a row
    without a partner is refused too.
    """
    a_by = {(r.query_id, r.repetition): r for r in rows_a if not r.warmup}
    b_by = {(r.query_id, r.repetition): r for r in rows_b if not r.warmup}
    found: list[Violation] = []

    def refuse(row: Record, reason: Reason, detail: str) -> None:
        found.append(
            Violation(mode_a, row.capacity, row.query_id, row.repetition, reason, detail, mode_b,
                      load=row.load)
        )

    for key in sorted(a_by.keys() | b_by.keys()):
        a, b = a_by.get(key), b_by.get(key)
        if a is None or b is None:
            missing = mode_b if b is None else mode_a
            refuse(a or b, Reason.MISSING_PAIR, f"no row in {missing}")  # type: ignore[arg-type]
        elif a.prompt_sha256 != b.prompt_sha256:
            detail = f"sha256 {a.prompt_sha256[:12]} vs {b.prompt_sha256[:12]}"
            refuse(a, Reason.PROMPT_DIFFERS, detail)
        elif None not in (a.prompt_tokens, b.prompt_tokens) \
                and a.prompt_tokens != b.prompt_tokens:
            refuse(
                a,
                Reason.PROMPT_TOKENS_DIFFER,
                f"{a.prompt_tokens} vs {b.prompt_tokens} server-counted prompt tokens",
            )
    return found
