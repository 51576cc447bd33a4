"""results/index.html: the one page of results as a self-contained file.

The headlines of :func:`kvlab.report.results_page.results_page` (the same figures
``kvlab summary`` prints), the machine, a link to every report under the results
folder (relative, so the folder can be moved or archived) and kv-bench's plot inlined.
Inline CSS, no script, nothing fetched.
"""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path

import kvlab
from kvlab.errors import ConfigError
from kvlab.report.across_runs import pareto, pareto_points
from kvlab.report.html import CSS
from kvlab.report.results_page import KV_BENCH_FILE, ResultsPage
from kvlab.report.results_runs import latest_runs

INDEX_FILE = "index.html"


def _link(path: str) -> str:
    return f'<a href="{escape(path)}">{escape(path)}</a>'


def _headline_rows(page: ResultsPage) -> str:
    rows = []
    for h in page.headlines:
        source = _link(h.source) if h.source else '<span class="muted">—</span>'
        load = ", ".join(f"{x:.2f}" for x in h.load) or "—"
        rows.append(f"<tr><td class=l>{escape(h.step)}</td><td class=l>{escape(h.text)}</td>"
                    f"<td class=l>{source}</td><td>{load}</td></tr>")
    return ("<table><thead><tr><th class=l>step</th><th class=l>headline figure</th>"
            "<th class=l>read from</th><th>load (1 min)</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def _pareto(page: ResultsPage) -> str:
    """Throughput against p95 ITL at every load point of the latest run of each
    experiment, one line per experiment and mode (read from their evaluation.json)."""
    points = [p for name, run in latest_runs(page.root)[0].items()
              for p in pareto_points(run.evaluation, prefix=f"{name} · ")]
    png = pareto(points, title="Throughput against p95 effective ITL, every load run")
    if png is None:
        return ""
    return ("<h3>Throughput against latency (Pareto)</h3><p class=muted>Output tokens/s of "
            "the valid rows against their p95 effective ITL, per load point, one line per "
            "experiment and mode (each experiment's latest run); ringed: the points no "
            "other point beats on both.</p>" + _img(png, "Pareto: throughput against ITL"))


def _plot(page: ResultsPage) -> str:
    png = page.root / KV_BENCH_FILE.with_suffix(".png")
    parts = [_img(png.read_bytes(), "kv-bench: decode per token, naive vs cached")] \
        if png.is_file() else []
    parts.append(_pareto(page))
    body = "".join(parts)
    return f"<h2>Figures</h2>{body}" if body else ""


def render_index(page: ResultsPage) -> str:
    """The page as one HTML document."""
    reports = "".join(f"<li>{_link(r)}</li>" for r in page.reports)
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>kvlab results: {escape(str(page.root))}</title><style>{CSS}</style></head>"
        f"<body><h1>kvlab results</h1><p class=muted>{escape(page.machine_line())}. "
        f"kvlab {escape(kvlab.__version__)}; each figure is read from the file named "
        "beside it; load (1 min): the 1-minute load average each step recorded (runs: "
        "at each invocation's start and stop).</p>"
        f"<h2>Headline figures</h2>{_headline_rows(page)}"
        f"<h2>Reports</h2><ul>{reports or '<li>none</li>'}</ul>"
        f"{_plot(page)}</body></html>\n"
    )


def write_index(page: ResultsPage) -> Path:
    """Write ``index.html`` into the results folder and return its path."""
    path = page.root / INDEX_FILE
    try:
        path.write_text(render_index(page), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path
