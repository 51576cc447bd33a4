"""report.md: protocol, metric definitions, validation, summaries, comparisons, manifest.

Every number comes from an :class:`~kvlab.bench.analysis.evaluate.Evaluation` (itself computed
from records.jsonl) or from the manifest; nothing is measured here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvlab.bench.analysis.evaluate import METRIC_DEFINITIONS, Evaluation
from kvlab.bench.analysis.load import LoadSummary
from kvlab.bench.analysis.saturation import ClientCheck
from kvlab.bench.analysis.valid_rows import RowCount
from kvlab.experiment import Experiment, Workload
from kvlab.report.prompts import output_rule, prompt_rule


def fmt(value: float | None, digits: int = 2) -> str:
    """A number for a table; an em dash when missing."""
    return "—" if value is None else f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.2f} %"


def valid_text(count: RowCount) -> str:
    """``14 of 16``: the valid rows a figure stands on, of the rows measured; a star when
    a point flag concerns them."""
    return f"{count.valid} of {count.measured}" + (" *" if count.flags else "")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


SUMMARY_HEADER = [
    "mode", "capacity", "valid", "refused", "prompt tok", "e2e mean ms", "e2e p95 ms",
    "tok/s", "prefill ms", "decode ms", "decode ms/tok", "TTFT mean ms", "TTFT p95 ms",
    "ITL mean ms", "ITL p95 ms", "Δ gap p50 ms", "Δ gap p95 ms", "deltas/row",
]


def summary_header(evaluation: Evaluation) -> list[str]:
    """SUMMARY_HEADER, with a "load" column after "capacity" when the run has load points."""
    if not evaluation.has_load:
        return list(SUMMARY_HEADER)
    return [*SUMMARY_HEADER[:2], "load", *SUMMARY_HEADER[2:]]


def summary_rows(evaluation: Evaluation) -> list[list[str]]:
    """One row per (mode, capacity, load), in the columns of :func:`summary_header`."""
    rows = []
    loads = evaluation.has_load
    for s in evaluation.summaries:
        rows.append([
            s.mode, str(s.capacity), *([s.load or "sequential"] if loads else []),
            valid_text(s.count), s.count.refused_text(),
            fmt(s.mean_prompt_tokens, 0), fmt(s.mean_ms), fmt(s.e2e_ms["p95"]),
            fmt(s.tokens_per_second), fmt(s.mean_prompt_ms), fmt(s.mean_decode_ms),
            fmt(s.mean_decode_per_token_ms, 3), fmt(s.ttft_ms["mean"]), fmt(s.ttft_ms["p95"]),
            fmt(s.itl_effective_ms["mean"], 3), fmt(s.itl_effective_ms["p95"], 3),
            fmt(s.inter_delta_median_ms, 3), fmt(s.inter_delta_p95_ms, 3),
            fmt(s.mean_content_deltas, 1),
        ])
    return rows


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


def render_report(evaluation: Evaluation, experiment: Experiment,
                  manifest: dict[str, Any], intervals: str | None = None) -> str:
    """The whole report as Markdown; ``intervals`` is report.verdicts.intervals_markdown."""
    w, p = experiment.workload, experiment.protocol
    out: list[str] = [f"# kvlab run `{evaluation.run_id}` — {experiment.name}", ""]
    if experiment.description:
        out += [experiment.description, ""]
    out += [
        "## Protocol", "",
        f"- Queries per (mode, capacity): {queries_line(w, manifest)} "
        f"× {w.repetitions} repetition(s); {w.warmup} warm-up request(s) per server, "
        "recorded and flagged, never aggregated.",
        f"- {prompt_rule(w.prompt_fraction, w.dataset)} How tokens were counted, and what "
        "the server counted: section Prompts.",
        f"- {output_rule(w)} (ignore_eos={p.ignore_eos}), "
        f"temperature {p.temperature:g}, seed {p.seed}, cache_prompt={p.cache_prompt}, "
        f"cache_salt={p.cache_salt}.",
        f"- Requests sequential; request timeout {p.request_timeout_s:g} s; readiness "
        f"timeout {p.ready_timeout_s:g} s.",
        "- Modes:", "",
    ]
    if manifest.get("overrides"):  # kvlab run --queries N
        given = ", ".join(f"{k} = {v}" for k, v in manifest["overrides"].items())
        out[-2:-2] = [f"- Overrides of this run (kvlab run): {given}; experiment.toml in the "
                      "run dir says so, manifest.json keeps the file verbatim."]
    if manifest.get("no_launch"):  # kvlab run --no-launch
        where = ", ".join(f"{k} → {v}" for k, v in manifest["no_launch"]["endpoints"].items())
        out[-2:-2] = [f"- Servers not launched by kvlab (--no-launch), measured at: {where}."]
    for m in experiment.modes:
        shown = m.settings.model_dump(mode="json", exclude_none=True, exclude={"kind"})
        out.append(f"  - `{m.name}`: server {m.server}, API {m.api}, stream={m.stream}, "
                   f"capacities {experiment.capacities(m)}, settings {shown}")
    out += ["", "## Metric definitions", ""]
    out += _table(["metric", "definition"],
                  [[f"`{k}`", v] for k, v in METRIC_DEFINITIONS.items()])
    counts = evaluation.counts
    out += ["", "## Validation", "",
            f"{counts['records']} records: {counts['warmup']} warm-up, {counts['measured']} "
            f"measured rows ({counts['superseded']} earlier attempts superseded by a "
            f"resume): {evaluation.valid.count.describe(flags=False)}. Every figure below "
            "stands on the valid rows only and says how many (n of m).", ""]
    out += verdicts_lines(evaluation)
    if evaluation.violations:
        loads = any(v.load is not None for v in evaluation.violations)
        out += _table(["mode", "capacity", *(["load"] if loads else []), "query", "rep",
                       "reason", "detail"], [
            [v.mode if v.other_mode is None else f"{v.mode} vs {v.other_mode}",
             str(v.capacity), *([v.load or "sequential"] if loads else []), v.query_id,
             str(v.repetition), str(v.reason), v.detail]
            for v in evaluation.violations
        ])
    else:
        out.append("No row or pair was refused.")
    if evaluation.prefix_reuse:
        out += ["", "Prefix reuse (cache_prompt = false: a row answered partly from the "
                "server's prefix cache is refused, by its own cached-token count or by "
                "the server's prefix-cache counter over its point):", ""]
        out += [f"- {p.describe()}" for p in evaluation.prefix_reuse]
    cell, equal = ("(mode, capacity, load)", "equal capacity and load") \
        if evaluation.has_load else ("(mode, capacity)", "equal capacity")
    out += ["", f"## Summaries per {cell}", "",
            "Times in ms (means unless p95) over the valid rows; valid = n valid of m "
            "measured (*: a point flag concerns them, see Validation); refused: by "
            "class; tok/s = Σ output tokens / Σ e2e.", ""]
    out += _table(summary_header(evaluation), summary_rows(evaluation))
    out += ["", f"## Comparisons (ratio = mean A / mean B at {equal})", "",
            "A ratio above 1 means B took less time; reduction = 1 − 1/ratio "
            "(positive: B saves that share of A's time).", ""]
    if evaluation.comparisons:
        out += _table(comparison_header(evaluation), comparison_rows(evaluation))
    else:
        out.append("No comparison requested.")
    if intervals:
        out += ["", "## Comparisons with 95 % intervals and verdicts", "", intervals.rstrip()]
    out += ["", "## Manifest essentials", ""]
    host = manifest.get("host", {})
    out += [
        f"- kvlab {manifest.get('kvlab_version')}, git commit {manifest.get('git_commit')}",
        f"- host: {host.get('platform')}, {host.get('cpu')}, {host.get('cores')} cores, "
        f"{fmt((host.get('memory_bytes') or 0) / 2**30, 1)} GiB, Python {host.get('python')}, "
        f"torch {host.get('torch')}",
    ]
    for session in manifest.get("sessions", []):
        out.append(f"- session {session.get('started')} → {session.get('stopped', 'interrupted')}")
    for entry in manifest.get("servers", []):
        facts = entry.get("facts") or {}
        argv = " ".join(facts.get("argv", [])) if facts else "(external endpoint)"
        if facts.get("launched") is False:  # kvlab run --no-launch
            argv = f"not launched by kvlab: {facts.get('base_url')}"
        out.append(f"- `{entry['mode']}` @ {entry['capacity']}: `{argv}` "
                   f"({facts.get('version', '')}; "
                   f"log {facts.get('log') or facts.get('log_path') or '—'}; "
                   f"{entry.get('started')} → {entry.get('stopped')})")
    return "\n".join(out) + "\n"


def verdicts_lines(evaluation: Evaluation) -> list[str]:
    """The point verdicts of the server counters, as Markdown lines ([] without any)."""
    if not evaluation.verdicts:
        return []
    mode = ("--strict: counters that disagree with the records refuse their point"
            if evaluation.strict else "counters that disagree with the records flag "
            "their point; kvlab evaluate --strict refuses it")
    lines = [f"Verdicts of the server's own counters (/metrics) on whole points ({mode}):",
             ""]
    lines += [f"- {'REFUSED' if v.refuses else 'FLAGGED'} ({v.reason}): {v.describe()}"
              for v in evaluation.verdicts]
    return [*lines, ""]


def manifest_queries(manifest: dict[str, Any], default: int) -> int:
    return int(manifest.get("queries", default))


def queries_line(workload: Workload, manifest: dict[str, Any]) -> str:
    """How many queries each (mode, capacity) measures: the built-in count, or the
    dataset's rows (``prepared.json`` lists them)."""
    if workload.dataset.kind == "builtin":
        return str(manifest_queries(manifest, workload.queries))
    return f"the rows of the {workload.dataset.kind!r} dataset (prepared.json)"


def load_markdown(summaries: Sequence[LoadSummary]) -> str:
    """The "Load" section: one row per (mode, capacity, load) from bench.analysis.load summaries."""
    if all(s.load is None for s in summaries):  # sequential rows only
        return ""
    slo = next((s.slo for s in summaries if s.slo), {})
    slo_text = ", ".join(f"{k} ≤ {v:g}" for k, v in slo.items() if v is not None) or "none set"
    out = ["", "## Load", "",
           "Rates in requests/s. Send lag = t_sent − t_scheduled (how late a request left "
           "against its schedule); a point whose p95 lag exceeds the threshold is flagged "
           "SLIPPED: it offered less load than it claims. Span = first send to last end; "
           "achieved rate = rows / span, shown for a rate load and for a closed loop with "
           "more requests than users (one whose users all leave at once has no rate); "
           "req/s = valid rows / span; out tok/s = Σ output tokens of valid rows / span; "
           f"goodput counts valid rows meeting the SLOs ({slo_text}). valid = n valid "
           "of m requests sent (*: a point flag concerns them); refused: by class.", ""]
    header = ["mode", "capacity", "load", "rows", "ok", "valid", "refused", "span s",
              "target rate", "achieved rate", "lag p50 ms", "lag p99 ms", "max in flight",
              "req/s", "out tok/s", "goodput req/s", "SLO met", "schedule"]
    rows = [[s.mode, str(s.capacity), s.load or "sequential", str(s.requests), str(s.ok),
             valid_text(s.count), s.count.refused_text(),
             fmt(s.span_s, 3), fmt(s.target_rate), fmt(s.achieved_rate),
             fmt(s.send_lag_ms["p50"], 3),
             fmt(s.send_lag_ms["p99"], 3), str(s.max_in_flight), fmt(s.request_throughput),
             fmt(s.output_tokens_per_s, 1), fmt(s.goodput),
             "—" if s.slo_met is None else f"{s.slo_met}/{s.requests}",
             f"SLIPPED ({s.late} late > {s.slip_threshold_ms:g} ms)" if s.slipped else "kept"]
            for s in summaries]
    return "\n".join(out + _table(header, rows)) + "\n"


def aa_markdown(evaluation: Evaluation, mode: str) -> str:
    """The "A/A noise floor" section of a ``--repeat-aa`` run: the same mode twice."""
    pairs = [c for c in evaluation.comparisons if c.a == mode and c.status == "ok"]
    out = ["", "## A/A noise floor", "",
           f"`{mode}` was measured twice, as `{mode}` and `{mode}-again` in the run order "
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
    return "\n".join(out + _table(["capacity", *(["load"] if loads else []), "metric", "mean A",
                                   "mean A again", "ratio", "distance from 1"], rows)) + "\n"


def order_markdown(order: dict[str, Any] | None) -> str:
    """The "Run order" section: the order asked for, the one used, and its sequence."""
    if not order:
        return ""
    used = order.get("used")
    line = f"Order used: **{used}**"
    if order.get("requested") != used:
        line += f" (asked: {order.get('requested')}; {order.get('reason')})"
    blocks = " → ".join(f"{m}@{c}" + (f"[{p + 1}/{n}]" if n > 1 else "")
                        for m, c, p, n in order.get("sequence", []))
    return "\n".join(["", "## Run order", "", line + ".", "", f"Blocks: {blocks}", ""]) + "\n"


def kv_check_markdown(manifest: dict[str, Any]) -> str:
    """The KV check of every launched llama-server: kvlab's predicted KV-cache
    allocation next to the ``llama_kv_cache: size = ...`` lines of its log; "" when no
    server logged one. A disagreement is shown, never hidden."""
    from kvlab.servers.kvlog import render_markdown

    out: list[str] = []
    for entry in manifest.get("servers", []):
        check = (entry.get("facts") or {}).get("kv_check")
        if check:
            out += [f"### {entry.get('mode')} @ {entry.get('capacity')}", "",
                    render_markdown(check), ""]
    if not out:
        return ""
    return "\n".join(["", "## KV check: predicted vs allocated by llama-server", "", *out])


def client_markdown(check: ClientCheck) -> str:
    """The "Client load" section: a :class:`~kvlab.bench.analysis.saturation.ClientCheck` line,
    as a warning when the client came near its calibrated limit."""
    prefix = "**Warning:** " if check.warning else ""
    return "\n".join(["", "## Client load", "", prefix + check.text + ".", ""]) + "\n"
