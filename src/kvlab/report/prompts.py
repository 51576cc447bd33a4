"""The report's prompt facts: how the padding was sized, and what the prompts cost.

:func:`prompt_rule` is the one wording of the padding rule (report.md and report.html
both use it; :mod:`kvlab.bench.plan.workload` is the code it describes).
:func:`prompts_markdown` is the report's "Prompts" section: per capacity, the sizing
method (manifest ``prompt_sizing``, see :mod:`kvlab.bench.plan.sizing`), the target, and
the prompt tokens the server counted in the measured records (min / mean / max).
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean

from kvlab.bench.plan.builtin import BuiltinDataset
from kvlab.bench.plan.dataset import DatasetSettings
from kvlab.experiment import Workload
from kvlab.markdown import row
from kvlab.report.section import ReportInput, Section
from kvlab.rundir import Outcome, Record, RunState


def prompt_rule(fraction: float, dataset: DatasetSettings | None = None) -> str:
    """How the prompts were made, in words: ``dataset``'s rule (default: the builtin
    padding rule) for prompt fraction ``fraction`` (f)."""
    return (dataset or BuiltinDataset()).prompt_rule(fraction)


def output_rule(workload: Workload) -> str:
    """The output length asked of each row, in words."""
    if isinstance(workload.dataset, BuiltinDataset):
        return f"Output forced to {workload.output_tokens} tokens"
    return (f"Output forced to each row's own length (the dataset's; "
            f"[workload] output_tokens = {workload.output_tokens} where a row gives none)")


def prompt_token_spread(records: Sequence[Record]) -> dict[int, tuple[int, float, int, int]]:
    """Per capacity: (min, mean, max, rows) of the server-counted prompt tokens of the
    measured ok records that state them (warm-ups left out)."""
    by_capacity: dict[int, list[int]] = {}
    for r in records:
        if not r.warmup and r.outcome == Outcome.OK and r.prompt_tokens is not None:
            by_capacity.setdefault(r.capacity, []).append(r.prompt_tokens)
    return {c: (min(v), fmean(v), max(v), len(v)) for c, v in sorted(by_capacity.items())}


def prompts_markdown(state: RunState, records: Sequence[Record],
                     fraction: float, dataset: DatasetSettings | None = None) -> str:
    """The "Prompts" section of report.md ("" when nothing was prepared or measured)."""
    body = prompts_body(state, records, fraction, dataset)
    return f"\n## Prompts\n\n{body}" if body else ""


def prompts_body(state: RunState, records: Sequence[Record], fraction: float,
                 dataset: DatasetSettings | None = None) -> str:
    """The section's text without its heading (report.html renders it too)."""
    sizing = state.prompt_sizing or {}
    spread = prompt_token_spread(records)
    capacities = sorted({int(c) for c in sizing} | set(spread))
    if not capacities:
        return ""
    padded = dataset is None or isinstance(dataset, BuiltinDataset)  # f·C is its target
    lines = [prompt_rule(fraction, dataset), "",
             "| capacity | target f·C | sized with | server-counted prompt tokens "
             "min / mean / max | rows |", "|---|---|---|---|---|"]
    for capacity in capacities:
        facts = sizing.get(str(capacity))
        how = facts.describe() if facts else "— (not recorded)"
        if capacity in spread:
            low, mean, high, rows = spread[capacity]
            counted, n = f"{low} / {mean:.1f} / {high}", str(rows)
        else:
            counted, n = "— (no record states them)", "0"
        target = str(int(fraction * capacity)) if padded else "each row's own"
        lines.append(row([capacity, target, how, counted, n]))
    methods = {f.method for f in sizing.values()}
    if methods - {"server-tokenize"}:
        lines += ["", "A tokenizer file counts the prompt text (no chat template); a "
                  "calibration counts what the server reports for the whole request, chat "
                  "template included. The server-counted column is what each request cost."]
    return "\n".join(lines) + "\n"


class Prompts(Section):
    """How the prompts were sized and what the server counted of them."""

    heading = "Prompts"

    def body(self, report: ReportInput) -> str:
        if report.experiment is None:
            return ""
        workload = report.experiment.workload
        return prompts_body(report.state, report.records, workload.prompt_fraction,
                            workload.dataset)
