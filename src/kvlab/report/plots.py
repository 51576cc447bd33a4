"""Report figures as PNG bytes: phase bars, latency CDFs, latency against prompt
length, throughput against load, the server's gauges against time, latency against
closed-loop users with the predicted KV knee, sessions' TTFT and cached share against
turn index. Each function
returns None when the run has nothing to draw (no server timings, a single load
point, no gauges...).

Matplotlib is used through ``Figure`` objects with the Agg canvas (no pyplot state,
no display needed). Figures are small (about 700 x 300 px) to keep report.html light.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvlab.analysis.knee_check import KneeCheck
from kvlab.analysis.metric import Metric
from kvlab.analysis.sessions import SessionsCell
from kvlab.analysis.summaries import Summary, load_value
from kvlab.analysis.summary_metrics import E2E, ITL, TTFT
from kvlab.analysis.valid_rows import ValidRows
from kvlab.labels import load_order, read_label
from kvlab.rundir import GaugeSample

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 90
PHASE_COLOURS = {"prefill": "#4c72b0", "decode": "#dd8452", "overhead": "#8c8c8c"}


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    return fig


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _colours(modes: Sequence[str]) -> dict[str, str]:
    palette = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860",
               "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"]
    return {mode: palette[i % len(palette)] for i, mode in enumerate(modes)}


def _style(ax: Axes) -> None:
    ax.grid(True, alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def phase_bars(summaries: Sequence[Summary]) -> bytes | None:
    """Stacked mean prefill / decode / overhead (ms) per mode, grouped by capacity.

    Uses the first load point of each (mode, capacity) (the sequential one in a plain
    run); None when no group has server timings.
    """
    first: dict[tuple[str, int], Summary] = {}
    for s in sorted(summaries, key=lambda s: load_order(s.load)):
        if "prefill_ms" in s.metrics and "decode_ms" in s.metrics:
            first.setdefault((s.mode, s.capacity), s)
    if not first:
        return None
    modes = list(dict.fromkeys(mode for mode, _ in first))
    capacities = sorted({cap for _, cap in first})
    width = 0.8 / len(modes)
    fig = _figure(9.0, 3.2)
    ax = fig.add_subplot()
    for i, mode in enumerate(modes):
        for j, cap in enumerate(capacities):
            found = first.get((mode, cap))
            if found is None:
                continue
            s = found
            x = j - 0.4 + width * (i + 0.5)
            bottom = 0.0
            for phase in ("prefill", "decode", "overhead"):
                dist = s.metrics.get(f"{phase}_ms")
                value = max(dist.mean or 0.0, 0.0) if dist else 0.0
                ax.bar(x, value, width * 0.9, bottom=bottom, color=PHASE_COLOURS[phase],
                       label=phase if (i, j) == (0, 0) else None)
                bottom += value
            ax.text(x, bottom, mode, ha="center", va="bottom", fontsize=7, rotation=0)
    ax.set_xticks(range(len(capacities)), [f"capacity {c}" for c in capacities])
    ax.set_ylabel("mean time (ms)")
    ax.set_title("Where the time goes: prefill / decode / overhead per mode", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    _style(ax)
    return _png(fig)


def _cdf(ax: Axes, vals: list[float], colour: str, label: str) -> None:
    xs = sorted(vals)
    ys = [(i + 1) / len(xs) for i in range(len(xs))]
    ax.step(xs, ys, where="post", color=colour, label=label, linewidth=1.4)


def latency_cdfs(valid: ValidRows) -> bytes | None:
    """Empirical CDFs of e2e and TTFT (ms) over the valid rows, one line per mode, one
    row per capacity."""
    by = valid.groups()
    colours = _colours(valid.modes())
    capacities = sorted({cap for _, cap, _ in by})
    if not capacities:
        return None
    fig = _figure(9.0, 2.3 * len(capacities) + 0.3)
    axes = fig.subplots(len(capacities), 2, squeeze=False)
    drew = False
    for row, cap in enumerate(capacities):
        for col, metric in enumerate((E2E, TTFT)):
            ax = axes[row][col]
            for (mode, c, load), group in by.items():
                if c != cap:
                    continue
                vals = metric.values(group.rows)
                if vals:
                    label = mode if load is None else f"{mode} {load}"
                    _cdf(ax, vals, colours[mode], label)
                    drew = True
            ax.set_title(f"{metric.name} CDF, capacity {cap}", fontsize=9)
            ax.set_xlabel("ms", fontsize=8)
            ax.set_ylim(0, 1.02)
            ax.tick_params(labelsize=7)
            _style(ax)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7, loc="lower right")
    return _png(fig) if drew else None


def against_prompt_length(valid: ValidRows) -> bytes | None:
    """TTFT and effective ITL (ms) of the valid rows against server-counted prompt
    tokens, per mode."""
    good = valid.rows
    colours = _colours(valid.modes())
    fig = _figure(9.0, 3.0)
    axes = fig.subplots(1, 2)
    drew = False
    metric: Metric
    for ax, metric in zip(axes, (TTFT, ITL), strict=True):
        for mode in colours:
            pts = [(r.prompt_tokens, v) for r in good
                   if r.mode == mode and r.prompt_tokens is not None
                   and (v := metric.of(r)) is not None]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.scatter(xs, ys, s=12, alpha=0.7, color=colours[mode], label=mode)
                drew = True
        ax.set_title(f"{metric.name} vs prompt length", fontsize=9)
        ax.set_xlabel("prompt tokens (server-counted)", fontsize=8)
        ax.set_ylabel("ms", fontsize=8)
        ax.tick_params(labelsize=7)
        _style(ax)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return _png(fig) if drew else None


def throughput_vs_load(summaries: Sequence[Summary]) -> bytes | None:
    """System tokens/s and mean e2e against the load value (concurrency or rate).

    None unless some (mode, capacity) was measured at more than one load point.
    """
    lines: dict[tuple[str, int], list[Summary]] = {}
    for s in summaries:
        if load_value(s.load) is not None:
            lines.setdefault((s.mode, s.capacity), []).append(s)
    lines = {k: v for k, v in lines.items() if len(v) > 1}
    if not lines:
        return None
    colours = _colours(list(dict.fromkeys(mode for mode, _ in lines)))
    kinds = sorted({(k.name, k.axis) for v in lines.values() for s in v
                    if (k := read_label(s.load).kind) is not None})
    xlabel = kinds[0][1] if kinds else "load"
    fig = _figure(9.0, 3.0)
    ax_tp, ax_lat = fig.subplots(1, 2)
    styles = ["-", "--", ":", "-."]
    capacities = sorted({cap for _, cap in lines})
    for (mode, cap), points in lines.items():
        points = sorted(points, key=lambda s: load_order(s.load))
        xs = [load_value(s.load) for s in points]
        style = styles[capacities.index(cap) % len(styles)]
        label = f"{mode} @ {cap}"
        ax_tp.plot(xs, [s.figure("system_tokens_per_s") for s in points], style, marker="o",
                   color=colours[mode], label=label)
        e2e = [s.metrics["e2e_ms"].mean if "e2e_ms" in s.metrics else None for s in points]
        ax_lat.plot(xs, e2e, style, marker="o", color=colours[mode], label=label)
    ax_tp.set_title("throughput vs load", fontsize=9)
    ax_tp.set_ylabel("output tokens/s (system)", fontsize=8)
    ax_lat.set_title("mean e2e vs load", fontsize=9)
    ax_lat.set_ylabel("ms", fontsize=8)
    for ax in (ax_tp, ax_lat):
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=7)
        _style(ax)
    ax_tp.legend(fontsize=7)
    return _png(fig)


# (names under any prefix: kvlab: and vllm: share vLLM's, llama.cpp has its own), label
GAUGE_LINES = ((("num_requests_running", "requests_processing"), "running"),
               (("num_requests_waiting", "requests_deferred"), "waiting"),
               (("kv_blocks_in_use",), "KV blocks in use"))


def _gauge(sample: GaugeSample, names: tuple[str, ...]) -> float | None:
    """The sum over label sets of the first of ``names`` (any prefix: kvlab:, vllm:,
    llamacpp:) the sample has."""
    for name in names:
        values = [v for k, v in sample.samples.items()
                  if k.split("{")[0].split(":")[-1] == name]
        if values:
            return sum(values)
    return None


def gauges_over_time(samples: Sequence[GaugeSample]) -> bytes | None:
    """Per mode, the server's requests running and waiting and its KV blocks in use
    against run time, with each load point's start marked. None without samples."""
    modes = list(dict.fromkeys(s.mode for s in samples))
    if not modes:
        return None
    fig = _figure(9.0, 2.2 * len(modes))
    axes = fig.subplots(len(modes), 1, squeeze=False)[:, 0]
    colours = _colours([label for _, label in GAUGE_LINES])
    for ax, mode in zip(axes, modes, strict=True):
        rows = [s for s in samples if s.mode == mode]
        t = [s.t_ns / 1e9 for s in rows]
        for name, label in GAUGE_LINES:
            ys = [_gauge(s, name) for s in rows]
            if any(y is not None for y in ys):
                ax.step(t, [float("nan") if y is None else y for y in ys], where="post",
                        color=colours[label], label=label, linewidth=1)
        starts: dict[str, float] = {}
        for s, ts in zip(rows, t, strict=True):
            starts.setdefault(f"{s.load or 'sequential'} @ {s.capacity}", ts)
        for label, ts in starts.items():
            ax.axvline(ts, color="#8c8c8c", linewidth=0.6, linestyle=":")
            ax.annotate(label, (ts, 1.0), xycoords=("data", "axes fraction"),
                        fontsize=6, va="top", ha="left", color="#555555")
        ax.set_title(mode, fontsize=9)
        ax.set_ylabel("requests / blocks", fontsize=8)
        ax.tick_params(labelsize=7)
        _style(ax)
    axes[-1].set_xlabel("run time (s)", fontsize=8)
    handles: dict[str, Any] = {}
    for ax in axes:  # one legend for every line drawn in any panel
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    axes[0].legend(list(handles.values()), list(handles), fontsize=7, loc="upper left",
                   bbox_to_anchor=(1.0, 1.0))
    return _png(fig)


def knee_latency(check: KneeCheck) -> bytes | None:
    """TTFT and effective ITL (median, and p95 dashed; ms) of one (mode, capacity)
    against the number of closed-loop users N, with the predicted knee drawn: the last
    N that fits (solid) and the first past it (dotted). None without latencies."""
    points = [p for p in check.points if p.ttft_p50_ms is not None]
    if not points:
        return None
    xs = [p.users for p in points]
    fig = _figure(9.0, 2.8)
    axes = fig.subplots(1, 2)
    for ax, name, p50, p95 in (
            (axes[0], "TTFT", [p.ttft_p50_ms for p in points], [p.ttft_p95_ms for p in points]),
            (axes[1], "ITL (effective)", [p.itl_p50_ms for p in points],
             [p.itl_p95_ms for p in points])):
        ax.plot(xs, [float("nan") if v is None else v for v in p50], marker="o",
                color="#4c72b0", label="median")
        ax.plot(xs, [float("nan") if v is None else v for v in p95], "--", marker=".",
                color="#4c72b0", alpha=0.6, label="p95")
        if check.knee is not None:
            ax.axvline(check.knee.fits, color="#55a868", linewidth=1.2,
                       label=f"predicted knee: fits {check.knee.fits}")
            ax.axvline(check.knee.first_past, color="#c44e52", linewidth=1.2, linestyle=":",
                       label=f"first past: {check.knee.first_past}")
        for p in points:
            if p.past:
                ax.scatter([p.users], [p.ttft_p50_ms if name == "TTFT" else p.itl_p50_ms],
                           marker="x", color="#c44e52", zorder=3, s=30)
        ax.set_title(f"{check.mode} @ {check.capacity}: {name} vs N (x: queued or "
                     "preempted)", fontsize=9)
        ax.set_xlabel("closed-loop users N", fontsize=8)
        ax.set_ylabel("ms", fontsize=8)
        ax.tick_params(labelsize=7)
        _style(ax)
    axes[0].legend(fontsize=7, loc="upper left")
    return _png(fig)


def sessions_by_turn(cells: Sequence[SessionsCell]) -> bytes | None:
    """TTFT (p50, ms) and the cached share of the prompt (dashed: the share predicted)
    against turn index, one line per mode and load point, one row per capacity."""
    drawn = [c for c in cells if any(i.ttft_ms.count for i in c.by_index)]
    if not drawn:
        return None
    colours = _colours(list(dict.fromkeys(f"{c.mode} {c.load}" for c in drawn)))
    capacities = sorted({c.capacity for c in drawn})
    fig = _figure(9.0, 2.5 * len(capacities) + 0.3)
    axes = fig.subplots(len(capacities), 2, squeeze=False)
    for row, cap in enumerate(capacities):
        ttft, share = axes[row][0], axes[row][1]
        for c in (c for c in drawn if c.capacity == cap):
            name = f"{c.mode} {c.load}"
            xs = [i.index for i in c.by_index if i.ttft_ms.p50 is not None]
            ttft.plot(xs, [i.ttft_ms.p50 for i in c.by_index if i.ttft_ms.p50 is not None],
                      marker="o", color=colours[name], label=name, linewidth=1.3)
            cached = [(i.index, i.cached_share) for i in c.by_index
                      if i.cached_share is not None]
            if cached:
                share.plot([x for x, _ in cached], [y for _, y in cached], marker="o",
                           color=colours[name], label=name, linewidth=1.3)
            predicted = [(i.index, i.predicted_share) for i in c.by_index
                         if i.predicted_share is not None and i.cached_share is not None]
            if predicted:
                share.plot([x for x, _ in predicted], [y for _, y in predicted],
                           linestyle="--", color=colours[name], linewidth=1.0)
        ttft.set_title(f"TTFT p50 by turn, capacity {cap}", fontsize=9)
        ttft.set_ylabel("ms", fontsize=8)
        share.set_title(f"cached share of the prompt (dashed: predicted), capacity {cap}",
                        fontsize=9)
        share.set_ylim(-0.02, 1.02)
        for ax in (ttft, share):
            ax.set_xlabel("turn", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.xaxis.get_major_locator().set_params(integer=True)
            _style(ax)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
    return _png(fig)
