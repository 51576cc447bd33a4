"""Two runs side by side: the same modes at the same capacities, ratio A/B per metric.

Two runs are comparable only when they did the same work: the same prompt (SHA-256)
for every query measured at a capacity in both, the same requested output tokens, and
at least one mode in common. Otherwise :func:`compare_runs` raises ValidationFailure
naming the first difference. Each run's rows are validated as its evaluation validates
them (:func:`kvlab.store.evaluation.valid_rows_of`); within a (mode, capacity,
load) cell, rows are paired on (query, repetition) exactly as between two modes of one
run (:func:`kvlab.analysis.comparisons.compare_rows`), and each side says what
it stands on (n valid of m); "A" is the first run, "B" the second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvlab.analysis.comparisons import COMPARED_METRICS, PairComparison, compare_rows
from kvlab.analysis.metric import Metric
from kvlab.analysis.summaries import modes_in_order
from kvlab.errors import ValidationFailure
from kvlab.report.verdicts import comparisons_markdown
from kvlab.rundir import Record, RunDir
from kvlab.store.evaluation import valid_rows_of


@dataclass
class RunComparison:
    """Per (mode, capacity, load) in both runs: B (second run) against A (first)."""

    run_a: str
    run_b: str
    path_a: str
    path_b: str
    modes: list[str]  # modes measured in both runs
    comparisons: list[tuple[str, PairComparison]]  # (mode, comparison "A" vs "B")

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_a": self.run_a, "run_b": self.run_b, "path_a": self.path_a,
            "path_b": self.path_b, "modes": self.modes,
            "comparisons": [{"mode": mode, **c.to_dict()} for mode, c in self.comparisons],
        }

    def markdown(self) -> str:
        """The comparisons as markdown tables (A = first run, B = second run)."""
        head = f"A = run {self.run_a} ({self.path_a}); B = run {self.run_b} ({self.path_b})\n\n"
        parts = [head]
        for mode, c in self.comparisons:
            parts.append(f"### mode {mode}\n\n{comparisons_markdown([c])}")
        return "\n".join(parts)


def check_comparable(a: Sequence[Record], b: Sequence[Record]) -> None:
    """Raise ValidationFailure when runs did different work (first difference named)."""
    if not a or not b:
        empty = "A" if not a else "B"
        raise ValidationFailure(f"run {empty} has no measured rows; nothing to compare")
    tokens_a = sorted({r.requested_tokens for r in a})
    tokens_b = sorted({r.requested_tokens for r in b})
    if tokens_a != tokens_b:
        raise ValidationFailure(
            f"runs are not comparable: different output tokens (A requested {tokens_a}, "
            f"B requested {tokens_b})"
        )
    prompts_a: dict[tuple[int, str], str] = {}
    for r in a:
        prompts_a.setdefault((r.capacity, r.query_id), r.prompt_sha256)
    for r in b:
        sha_a = prompts_a.get((r.capacity, r.query_id))
        if sha_a is not None and sha_a != r.prompt_sha256:
            raise ValidationFailure(
                f"runs are not comparable: query {r.query_id} at capacity {r.capacity} has "
                f"prompt sha256 {sha_a[:12]} in A and {r.prompt_sha256[:12]} in B"
            )
    modes_a, modes_b = modes_in_order(a), modes_in_order(b)
    if not set(modes_a) & set(modes_b):
        raise ValidationFailure(
            f"runs are not comparable: no common mode (A has {', '.join(modes_a)}; "
            f"B has {', '.join(modes_b)})"
        )


def compare_runs(run_a: RunDir, run_b: RunDir, *, resamples: int = 2000,
                 strict: bool = False,
                 metrics: Sequence[Metric] = COMPARED_METRICS) -> RunComparison:
    """Compare every (mode, capacity, load) measured in both runs; B against A
    (``strict``: points whose server counters disagree with the records are refused;
    ``metrics``: the times compared, kvlab's unless a tool's definitions are asked)."""
    valid_a, valid_b = valid_rows_of(run_a, strict=strict), valid_rows_of(run_b, strict=strict)
    rows_a, rows_b = list(valid_a.sent), list(valid_b.sent)
    check_comparable(rows_a, rows_b)
    by_a, by_b = valid_a.groups(), valid_b.groups()
    common = [key for key in by_a if key in by_b]
    if not common:
        cells_a = sorted({f"{m}@{c}" for m, c, _ in by_a})
        cells_b = sorted({f"{m}@{c}" for m, c, _ in by_b})
        raise ValidationFailure(
            f"runs are not comparable: no (mode, capacity) in common (A: {', '.join(cells_a)}; "
            f"B: {', '.join(cells_b)})"
        )
    comparisons = [
        (mode, compare_rows("A", by_a[(mode, cap, load)], "B", by_b[(mode, cap, load)],
                            capacity=cap, load=load, resamples=resamples,
                            metrics=metrics))
        for mode, cap, load in common
    ]
    modes = [m for m in modes_in_order(rows_a) if m in set(modes_in_order(rows_b))]
    return RunComparison(run_a.run_id, run_b.run_id, str(run_a.path), str(run_b.path),
                         modes, comparisons)
