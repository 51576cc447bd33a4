"""report.html: one self-contained file (inline CSS, plots as base64 PNG, no URL).

Sections: protocol, metric definitions, validation, summaries per (mode, capacity,
load), comparisons with 95 % intervals and verdicts, figures, KV check, manifest.
Every number comes from the run's :class:`~kvlab.bench.analysis.evaluate.Evaluation`,
the same summaries and comparisons evaluation.json and report.md hold; this module
only renders them.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from html import escape
from pathlib import Path
from typing import Any

import kvlab
from kvlab.bench.analysis.comparisons import PairComparison
from kvlab.bench.analysis.definitions import Cell
from kvlab.bench.analysis.evaluate import Evaluation
from kvlab.bench.analysis.saturation import ClientCheck
from kvlab.bench.analysis.summaries import (
    EXTRA_DEFINITIONS,
    ROW_METRICS,
    Summary,
    report_order,
)
from kvlab.bench.analysis.valid_rows import ValidRows
from kvlab.bench.analysis.validate import Violation
from kvlab.bench.records import GaugeSample, Record
from kvlab.bench.store.evaluation import evaluate_run_dir
from kvlab.bench.store.rundir import RunDir, load_run
from kvlab.report import plots, reasoning
from kvlab.report import server_histograms as histograms
from kvlab.report.markdown import load_markdown, valid_text, verdicts_lines
from kvlab.report.prompts import output_rule, prompt_rule, prompts_body
from kvlab.report.verdicts import comparison_rows, fmt_num, load_label
from kvlab.report.workloads import sections as workload_sections

HTML_FILE = "report.html"

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;
max-width:1120px;color:#1d1d1f;padding:0 16px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px;
border-bottom:1px solid #ddd;padding-bottom:3px}h3{font-size:14px;margin:14px 0 4px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:12.5px}
th,td{border:1px solid #d8d8d8;padding:3px 7px;text-align:right}
th{background:#f3f3f5}td.l,th.l{text-align:left}
.faster{color:#17803d;font-weight:600}.slower{color:#b3261e;font-weight:600}
.nodiff{color:#6b6b6b}.warn{background:#fff4e5;border-left:4px solid #f0a020;padding:6px 10px}
.muted{color:#6b6b6b}img{max-width:100%;border:1px solid #eee;margin:6px 0}
pre{background:#f7f7f9;padding:8px;overflow:auto;font-size:11.5px}
code{background:#f3f3f5;padding:0 3px}
"""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """An HTML table; the first ``left`` columns are left-aligned. Cells are escaped."""
    def cells(tag: str, values: Sequence[str]) -> str:
        return "".join(
            f'<{tag}{" class=l" if i < left else ""}>{escape(str(v))}</{tag}>'
            for i, v in enumerate(values)
        )
    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table><thead><tr>{cells('th', header)}</tr></thead><tbody>{body}</tbody></table>"


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def _markdown_block(text: str) -> str:
    """The little markdown kvlog.render_markdown emits: pipe tables, bullets, lines."""
    out: list[str] = []
    table: list[list[str]] = []

    def flush() -> None:
        if table:
            rows = [r for r in table if not all(set(c) <= set("-: ") for c in r)]
            out.append(_table(rows[0], rows[1:]))
            table.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            table.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        flush()
        if line.startswith("- "):
            out.append(f"<li>{escape(line[2:])}</li>")
        elif line.strip():
            out.append(f"<p>{escape(line)}</p>")
    flush()
    return "\n".join(out)


# ------------------------------------------------------------------------------ sections


def _protocol(run: RunDir, rows: Sequence[Record]) -> str:
    parts = ["<h2>Protocol</h2>"]
    experiment = run.known_experiment
    if experiment is not None:
        w, p = experiment.workload, experiment.protocol
        parts.append(f"<p>Experiment <b>{escape(experiment.name)}</b>. "
                     f"{escape(experiment.description)}</p>")
        parts.append(_table(["setting", "value"], [
            ["queries × repetitions", f"{w.queries} × {w.repetitions}"],
            ["capacities", ", ".join(map(str, experiment.all_capacities()))],
            ["output tokens (forced)", f"{output_rule(w)} (ignore_eos={p.ignore_eos})"],
            ["warm-up per (mode, capacity)", f"{w.warmup}, recorded, never aggregated"],
            ["prompt", prompt_rule(w.prompt_fraction, w.dataset)],
            ["temperature / seed / cache_prompt / cache_salt",
             f"{p.temperature:g} / {p.seed} / {p.cache_prompt} / {p.cache_salt}"],
            ["timeouts", f"request {p.request_timeout_s:g} s, readiness {p.ready_timeout_s:g} s"],
            ["modes", "; ".join(f"{m.name} ({m.server}, {m.api}, stream={m.stream})"
                                for m in experiment.modes)],
        ], left=2))
    apis = Counter(f"{r.api} {r.path} stream={r.stream}" for r in rows)
    loads = sorted({load_label(r.load) for r in rows})
    parts.append(
        f"<p>Observed: {len(rows)} measured rows; requests {escape(', '.join(apis))}; "
        f"requested output tokens {sorted({r.requested_tokens for r in rows})}; "
        f"load {escape(', '.join(loads))}. Clock: <code>perf_counter_ns</code> "
        "relative to the run start.</p>"
    )
    return "\n".join(parts)


def _definitions() -> str:
    rows = [[m.name, m.unit, m.definition] for m in ROW_METRICS]
    rows += [[name, "", text] for name, text in EXTRA_DEFINITIONS]
    return "<h2>Metric definitions</h2>" + _table(["metric", "unit", "definition"], rows, 3)


def _validation(evaluation: Evaluation, check: ClientCheck | None) -> str:
    violations = evaluation.row_violations
    pair_notes: list[Violation] = [v for c in evaluation.pairs for v in c.pair_violations]
    refused = {(v.mode, v.capacity, v.query_id, v.repetition) for v in violations}
    counts = evaluation.counts
    parts = ["<h2>Validation</h2>",
             f"<p>{counts['records']} records: {counts['warmup']} warm-up, "
             f"{counts['measured']} measured, {len(refused)} rows refused "
             "(left out of every aggregate): "
             f"{escape(evaluation.valid.count.describe(flags=False))}.</p>"]
    verdicts = verdicts_lines(evaluation)
    if verdicts:
        parts.append(_markdown_block("\n".join(verdicts)))
    if check is not None:
        css = ' class="warn"' if check.warning else ""
        parts.append(f"<p{css}>{escape(check.text)}.</p>")
    if violations or pair_notes:
        table_rows = [
            [v.mode if v.other_mode is None else f"{v.mode} vs {v.other_mode}",
             str(v.capacity), v.query_id, str(v.repetition), str(v.reason), v.detail]
            for v in [*violations, *pair_notes]
        ]
        reasons = Counter(str(v.reason) for v in [*violations, *pair_notes])
        parts.append("<p>Refusals by reason: " + escape(", ".join(
            f"{k} × {n}" for k, n in reasons.most_common())) + "</p>")
        parts.append(_table(["mode", "capacity", "query", "rep", "reason", "detail"],
                            table_rows, 6))
    else:
        parts.append("<p>No row or pair was refused.</p>")
    if evaluation.prefix_reuse:
        parts.append("<p>Prefix reuse (cache_prompt = false: a row answered partly from "
                     "the server's prefix cache is refused, by its own cached-token count "
                     "or by the server's prefix-cache counter over its point):</p><ul>" + "".join(
                         f"<li>{escape(p.describe())}</li>" for p in evaluation.prefix_reuse)
                     + "</ul>")
    return "\n".join(parts)


def _summaries(summaries: Sequence[Summary]) -> str:
    header = ["mode", "capacity", "load", "valid", "refused", "prompt tok", "e2e mean",
              "e2e mean 95 % CI", "e2e p50", "e2e p95", "TTFT mean", "TTFT p95", "ITL mean",
              "prefill", "decode", "overhead", "tok/s e2e", "tok/s system"]
    rows = []
    for s in summaries:
        def mean(name: str, digits: int = 2, s: Summary = s) -> str:
            d = s.metrics.get(name)
            return fmt_num(d.mean if d else None, digits)

        def pct(name: str, field: str, s: Summary = s) -> str:
            d = s.metrics.get(name)
            return fmt_num(getattr(d, field) if d else None)

        ci = s.mean_intervals.get("e2e_ms")
        rows.append([
            s.mode, str(s.capacity), load_label(s.load), valid_text(s.count),
            s.count.refused_text(),
            fmt_num(s.mean_prompt_tokens, 0), mean("e2e_ms"),
            f"[{ci.low:.2f}, {ci.high:.2f}]" if ci else "–", pct("e2e_ms", "p50"),
            pct("e2e_ms", "p95"), mean("ttft_ms"), pct("ttft_ms", "p95"),
            mean("itl_effective_ms", 3), mean("prefill_ms"), mean("decode_ms"),
            mean("overhead_ms"), fmt_num(s.e2e_tokens_per_s), fmt_num(s.system_tokens_per_s),
        ])
    return ("<h2>Summaries per (mode, capacity)</h2><p class=muted>Times in ms over valid "
            "rows; valid = n valid of m measured (*: a point flag concerns them), refused "
            "by class; means unless marked; CI = bootstrap 95 % interval of the mean.</p>"
            + _table(header, rows, 3))


_VERDICT_CLASS = {"faster": "faster", "slower": "slower"}


def _comparisons(comparisons: Sequence[PairComparison], named: bool) -> str:
    parts = ["<h2>Comparisons</h2>",
             "<p>Ratio = mean A / mean B of a time at equal capacity and load: above 1, "
             "B took less time. The 95 % interval is a bootstrap (BCa) interval, paired "
             "over the queries both modes answered validly; the verdict is read from the "
             "interval alone (containing 1: no detectable difference - not proof of "
             "equality). Reduction = 1 − B/A.</p>"]
    if not named and comparisons:
        parts.append("<p class=muted>The experiment names no pairs: every pair of modes "
                     "is compared.</p>")
    if not comparisons:
        parts.append("<p>No comparison: a single mode at every capacity.</p>")
    for p in comparisons:
        parts.append(f"<h3>{escape(p.mode_a)} (A) vs {escape(p.mode_b)} (B) — capacity "
                     f"{p.capacity}, {escape(load_label(p.load))}</h3>")
        if p.refused:
            parts.append(f'<p class="warn">Refused: {escape(p.refused)}</p>')
            continue
        body = []
        for r, c in zip(comparison_rows(p), p.metrics, strict=True):
            v = c.verdict
            cls = _VERDICT_CLASS.get(str(v), "nodiff")
            cells = [r["metric"], r["mean_a"], r["mean_b"], r["ratio"], r["interval"],
                     r["reduction"]]
            tds = "".join(f"<td{' class=l' if i == 0 else ''}>{escape(x)}</td>"
                          for i, x in enumerate(cells))
            body.append(f"<tr>{tds}<td class='l {cls}'>{escape(r['verdict'])}</td>"
                        f"<td>{escape(r['n'])}</td></tr>")
        head = "".join(f"<th>{h}</th>" for h in (
            "metric", "mean A (ms)", "mean B (ms)", "ratio A/B", "95 % interval",
            "reduction", "verdict", "n"))
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}"
                     "</tbody></table>")
    return "\n".join(parts)


def _load(evaluation: Evaluation) -> str:
    """What each load point achieved (report.md's "Load" section)."""
    text = load_markdown(evaluation.load).strip()
    if not text:
        return ""
    body = text.split("\n", 2)[2] if text.startswith("## Load") else text
    return f"<h2>Load</h2>\n{_markdown_block(body)}"


def _figures(valid: ValidRows, summaries: Sequence[Summary],
             gauges: Sequence[GaugeSample] = ()) -> str:
    parts = ["<h2>Figures</h2>"]
    figures = [
        ("Phase bars", plots.phase_bars(summaries),
         "Mean prefill, decode and overhead per mode (server timings)."),
        ("Latency distributions", plots.latency_cdfs(valid),
         "Empirical CDFs of e2e and TTFT: the further left, the faster."),
        ("TTFT and ITL against prompt length", plots.against_prompt_length(valid),
         "Prefill grows with the prompt; ITL should stay flat with a KV cache."),
        ("Throughput against load", plots.throughput_vs_load(summaries),
         "System output tokens/s and mean e2e per load point."),
        ("Server gauges during the load points", plots.gauges_over_time(gauges),
         "The server's /metrics, polled every 0.25 s (gauges.jsonl): requests running "
         "and waiting, KV blocks in use."),
    ]
    for title, png, caption in figures:
        if png is None:
            continue
        parts.append(f"<h3>{title}</h3><p class=muted>{caption}</p>{_img(png, title)}")
    return "\n".join(parts)


def kv_checks(manifest: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every non-empty ``kv_check`` found in the manifest, with where it was found.

    The llama.cpp server facts carry one per server; we search the whole manifest so
    the report does not depend on where the runner nests those facts.
    """
    return list(_find_key(manifest, "kv_check", ""))


def _find_key(node: Any, key: str, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        for name, value in node.items():
            here = f"{where}.{name}" if where else str(name)
            if name == key and isinstance(value, dict) and value:
                yield where or "manifest", value
            else:
                yield from _find_key(value, key, here)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _find_key(item, key, f"{where}[{i}]")


def _kv_check(manifest: dict[str, Any]) -> str:
    found = kv_checks(manifest)
    if not found:
        return ""
    from kvlab.servers.kvlog import render_markdown

    parts = ["<h2>KV check (predicted vs logged by llama-server)</h2>"]
    for where, check in found:
        parts.append(f"<h3>{escape(where)}</h3>")
        try:
            parts.append(_markdown_block(render_markdown(check)))
        except ValueError as exc:  # a check of another shape: show it raw, never drop it
            parts.append(f"<p>unreadable check ({escape(str(exc).splitlines()[0])})</p>"
                         f"<pre>{escape(json.dumps(check, indent=2))}</pre>")
    return "\n".join(parts)


def _server_counters(evaluation: Evaluation) -> str:
    """Each point's /metrics deltas and checks (report.md's section)."""
    from kvlab.report.server_counters import TITLE, section_body

    body = section_body(evaluation.server_counters)
    return f"<h2>{escape(TITLE)}</h2>\n{_markdown_block(body)}" if body else ""


def _section(title: str, body: str) -> str:
    """A report.md section's Markdown body under its title ("" without a body)."""
    return f"<h2>{escape(title)}</h2>\n{_markdown_block(body)}" if body else ""


def _prompts(run: RunDir, rows: Sequence[Record]) -> str:
    """How the prompts were sized and what the server counted (report.md's section)."""
    experiment = run.known_experiment
    body = prompts_body(run.manifest(), rows, experiment.workload.prompt_fraction,
                        experiment.workload.dataset) \
        if experiment is not None else ""
    return f"<h2>Prompts</h2>\n{_markdown_block(body)}" if body else ""


def _workers(manifest: dict[str, Any], rows: Sequence[Record]) -> str:
    """Where the load workers ran and their clock offsets (report.md's section)."""
    from kvlab.report.workers import TITLE, workers_body

    body = workers_body(manifest, rows)
    return f"<h2>{escape(TITLE)}</h2>\n{_markdown_block(body)}" if body else ""


def _peer_definitions(found: Sequence[Cell]) -> str:
    """The same run under vLLM's, GuideLLM's and AIPerf's definitions (report.md's)."""
    from kvlab.report.peer_definitions import TITLE, section_body

    return f"<h2>{escape(TITLE)}</h2>\n" + _markdown_block(section_body(found))


def render_html(run: RunDir, *, resamples: int = 2000,
                evaluation: Evaluation | None = None) -> str:
    """The whole report as one HTML document (no external resource), rendered from
    ``evaluation``: the run's (:func:`~kvlab.bench.store.evaluation.evaluate_run_dir`,
    the one evaluation of a run directory, when None)."""
    if evaluation is None:
        evaluation = evaluate_run_dir(run, resamples=resamples)
    rows = list(evaluation.valid.sent)
    summaries = report_order(evaluation.summaries)
    manifest = run.manifest()
    manifest_json = json.dumps(manifest, indent=2, default=str)
    body = "\n".join([
        f"<h1>kvlab run <code>{escape(run.run_id)}</code></h1>",
        f"<p class=muted>Rebuilt from {escape(str(run.path))} by kvlab "
        f"{escape(kvlab.__version__)}.</p>",
        _protocol(run, rows),
        _prompts(run, rows),
        _definitions(),
        _validation(evaluation, evaluation.client),
        _summaries(summaries),
        _comparisons(evaluation.pairs, named=evaluation.named_pairs),
        _load(evaluation),
        _figures(evaluation.valid, summaries, run.gauges),
        _workers(manifest, rows),
        _kv_check(manifest),
        _section(reasoning.TITLE, reasoning.section_body(evaluation.reasoning)),
        _server_counters(evaluation),
        _section(histograms.TITLE, histograms.section_body(evaluation.server_histograms)),
        *(f"<h2>{escape(title)}</h2>\n{_markdown_block(text)}"
          for title, text in workload_sections(evaluation)),
        _peer_definitions(evaluation.definitions),
        "<h2>Manifest</h2><details><summary>manifest.json</summary>"
        f"<pre>{escape(manifest_json)}</pre></details>",
    ])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>kvlab report {escape(run.run_id)}</title><style>{CSS}</style></head>"
            f"<body>\n{body}\n</body></html>\n")


def write_html(run_dir: Path | str, *, resamples: int = 2000,
               evaluation: Evaluation | None = None) -> Path:
    """Write ``report.html`` into the run directory; return its path. ``evaluation``:
    the run's, when the caller has it (else :func:`render_html` evaluates the run)."""
    run = load_run(run_dir)
    path = run.path / HTML_FILE
    path.write_text(render_html(run, resamples=resamples, evaluation=evaluation),
                    encoding="utf-8")
    return path


__all__ = ["HTML_FILE", "kv_checks", "render_html", "write_html"]
