"""The "Step and floor" section: per point, the served inter-token latency beside the
engine's own step and the memory floor, and where a kvlab step's time goes.

Renders :class:`~kvlab.analysis.step_floor.PointStep` from the evaluation; computes
nothing but ratios of its figures.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.analysis.checks import STEP_FLOOR
from kvlab.analysis.step_floor import PointStep
from kvlab.report.section import ReportInput, Section, checked

TITLE = "Step and floor (/metrics)"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def section_body(points: Sequence[PointStep]) -> str:
    """The section's Markdown without its title; "" when no server kept step figures."""
    if not points:
        return ""
    lines = [
        "Per point, in ms: the client's mean effective ITL (served), the server's own "
        "mean step over the point (kvlab serve: `kvlab:step_duration_seconds`; vLLM: "
        "its own mean inter-token latency, `vllm:inter_token_latency_seconds`, and mean "
        "time queued), tokens sampled per step, and the memory floor of a step (bytes "
        "of weights it reads / the copy bandwidth the server measured at load). "
        "served/step 1.00× means serving adds nothing to the engine's step; step/floor "
        "1.00× means the step runs at the copy bandwidth. — : the server does not say.",
        "",
        "| mode | point | rows | served ITL | step | rows/step | floor | served/step | "
        "step/floor | vLLM ITL | vLLM queue |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        rps = "—" if p.rows_per_step is None else f"{p.rows_per_step:.1f}"
        lines.append(
            f"| {p.mode} | {p.load or 'sequential'} | {p.rows} | {_ms(p.served_itl_ms)} | "
            f"{_ms(p.step_ms)} | {rps} | {_ms(p.floor_ms)} | {_x(p.served_over_step)} | "
            f"{_x(p.step_over_floor)} | {_ms(p.server_itl_ms)} | {_ms(p.queue_ms)} |")
    phased = [p for p in points if p.phases_ms]
    if phased:
        names = sorted({n for p in phased for n in p.phases_ms},
                       key=lambda n: min(list(p.phases_ms).index(n) for p in phased
                                         if n in p.phases_ms))
        lines += ["", "Where a kvlab step's time goes: each phase's mean ms per step "
                  "(`kvlab:step_phase_seconds`; between: the gap before a step that "
                  "followed a busy one).", "",
                  "| mode | point | " + " | ".join(names) + " |",
                  "|---|---|" + "---|" * len(names)]
        for p in phased:
            cells = " | ".join(f"{p.phases_ms[n]:.2f}" if n in p.phases_ms else "—"
                               for n in names)
            lines.append(f"| {p.mode} | {p.load or 'sequential'} | {cells} |")
    return "\n".join(lines) + "\n"


class StepFloor(Section):
    """Served ITL beside the engine's own step and the memory floor."""

    heading = TITLE

    def body(self, report: ReportInput) -> str:
        return checked(report, STEP_FLOOR, section_body)
