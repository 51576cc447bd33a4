"""The "Embeddings" section: what an embeddings load measured instead of tokens.

An embeddings request has no first token, no inter-token latency and keeps no KV cache
past itself, so the token figures and ``kvlab memory`` say nothing about it. This
section gives, per mode, capacity and load point, the batch (inputs per request), the
request latency and the group's inputs/s and input tokens/s, from the evaluation's
summaries; it computes nothing. Absent when no summary has an embeddings figure.
"""

from __future__ import annotations

from kvlab.analysis.embedding_metrics import INPUT_TOKENS_PER_SECOND, INPUTS_PER_SECOND
from kvlab.analysis.metric import VALUE
from kvlab.analysis.summary_metrics import E2E
from kvlab.markdown import row
from kvlab.report.section import ReportInput, Section


def _n(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


class Embeddings(Section):
    """Latency and throughput of embeddings cells, against batch and load."""

    heading = "Embeddings"

    def body(self, report: ReportInput) -> str:
        cells = [s for s in report.evaluation.summaries
                 if s.stat(INPUTS_PER_SECOND, VALUE) is not None]
        if not cells:
            return ""
        experiment = report.experiment
        batch = {m.name: str(m.batch) for m in experiment.modes} if experiment else {}
        lines = [
            "An embeddings request carries a batch of inputs and gets one vector per "
            "input back, whole: no first token, no inter-token latency, and no KV cache "
            "kept past the request, so the token columns and `kvlab memory` say nothing "
            "here. Measured instead: the request latency (ms), and inputs and input tokens "
            "(the server's usage count) per second over each point's span. A row is valid "
            "when its answer holds one vector per input, all of the expected length (the "
            "request's `dimensions`, else the width the server declares), none with a "
            "value that is not a finite number.",
            "",
            "| mode | batch | capacity | load | valid rows | latency mean ms | latency p95 "
            "ms | inputs/s | input tok/s |",
            "|" + "---|" * 9,
        ]
        for s in cells:
            lines.append(row([s.mode, batch.get(s.mode, '—'), s.capacity, s.load or 'sequential',
                              f"{s.count.valid} of {s.count.of}", _n(s.stat(E2E, 'mean')),
                              _n(s.stat(E2E, 'p95')), _n(s.stat(INPUTS_PER_SECOND, VALUE)),
                              _n(s.stat(INPUT_TOKENS_PER_SECOND, VALUE), 0)]))
        return "\n".join(lines) + "\n"
