"""The strict comparisons of the experiment's ``compare`` pairs (ratio of means A/B and
reduction per compared metric) and, for a ``--repeat-aa`` run, the A/A noise floor.

The same pairs with their 95 % intervals and verdicts are
:mod:`kvlab.report.verdicts`.
"""

from __future__ import annotations

from kvlab.analysis.evaluate import Evaluation
from kvlab.report.markdown import fmt, md_table, pct
from kvlab.report.section import ReportInput, Section

COMPARISON_HEADER = ["A / B", "capacity", "metric", "mean A", "mean B", "ratio", "reduction"]


def comparison_header(evaluation: Evaluation) -> list[str]:
    """COMPARISON_HEADER, with a "load" column after "capacity" when the run has load points."""
    if not evaluation.has_load:
        return list(COMPARISON_HEADER)
    return [*COMPARISON_HEADER[:2], "load", *COMPARISON_HEADER[2:]]


def comparison_rows(evaluation: Evaluation) -> list[list[str]]:
    """One row per (pair, capacity, load, metric): means, ratio A/B and reduction, in the
    columns of :func:`comparison_header`."""
    rows = []
    loads = evaluation.has_load
    for c in evaluation.comparisons:
        where = [str(c.capacity), *([c.load or "sequential"] if loads else [])]
        if c.status != "ok":
            rows.append([f"{c.a} / {c.b}", *where, "refused", "", "", "", "; ".join(
                c.reasons[:3]) + (" …" if len(c.reasons) > 3 else "")])
            continue
        for name, m in c.metrics.items():
            rows.append([
                f"{c.a} / {c.b}", *where, name, fmt(m["mean_a"]), fmt(m["mean_b"]),
                fmt(m["ratio"], 3), pct(m["reduction"]),
            ])
    return rows


class Comparisons(Section):
    """The experiment's pairs, strictly: refused when any row of either was."""

    def title(self, report: ReportInput) -> str:
        equal = "equal capacity and load" if report.evaluation.has_load else "equal capacity"
        return f"Comparisons (ratio = mean A / mean B at {equal})"

    def body(self, report: ReportInput) -> str:
        evaluation = report.evaluation
        lines = ["A ratio above 1 means B took less time; reduction = 1 − 1/ratio "
                 "(positive: B saves that share of A's time).", ""]
        if evaluation.comparisons:
            lines += md_table(comparison_header(evaluation), comparison_rows(evaluation))
        else:
            lines.append("No comparison requested.")
        return "\n".join(lines) + "\n"


def aa_markdown(evaluation: Evaluation, mode: str) -> str:
    """The A/A section's body of a ``--repeat-aa`` run: the same mode twice."""
    pairs = [c for c in evaluation.comparisons if c.a == mode and c.status == "ok"]
    out = [f"`{mode}` was measured twice, as `{mode}` and `{mode}-again` in the run order "
           "above. Nothing differs "
           "between the two but time and chance, so any ratio away from 1 here is noise: "
           "a difference between two real modes no larger than this is not evidence.", ""]
    if not pairs:
        return "\n".join([*out, "No valid A/A comparison (see Validation)."]) + "\n"
    rows = []
    loads = evaluation.has_load
    for c in pairs:
        for name, m in c.metrics.items():
            ratio = m["ratio"]
            rows.append([str(c.capacity), *([c.load or "sequential"] if loads else []), name,
                         fmt(m["mean_a"]), fmt(m["mean_b"]), fmt(ratio, 3),
                         "—" if ratio is None else f"{abs(ratio - 1) * 100:.2f} %"])
    return "\n".join(out + md_table(["capacity", *(["load"] if loads else []), "metric",
                                     "mean A", "mean A again", "ratio", "distance from 1"],
                                    rows)) + "\n"


class AaNoiseFloor(Section):
    """A ``--repeat-aa`` run's mode against itself: the noise floor of a ratio."""

    heading = "A/A noise floor"

    def body(self, report: ReportInput) -> str:
        mode = report.evaluation.repeat_aa
        return aa_markdown(report.evaluation, mode) if mode else ""
