"""One page of results: the headline figure of each step of ``make run``, read from
the files the steps wrote (never retyped), and the machine they ran on.

A results folder (``make run`` writes ``results/``) holds:

- ``kv-bench/kv-bench.json``: naive vs cached decode per token (``kvlab kv-bench``);
- ``memory/*.json``: KV bytes by formula, measured, paged (``kvlab memory --out``);
- ``runs/<experiment>-<time>/``: run directories with ``evaluation.json`` and reports
  (the vLLM steps, ``vllm-notebook`` and ``serving-engines``, included).

Each step's file also records the machine (CPU, cores) and the load average at the
step's end (runs: at each session's start and stop). A run's figure says what it
stands on ("n valid of m"); an evaluation.json older than that is named, not read. A
step whose file is missing gets a line saying so. Runs of experiments the page has no
headline for still get a line (their first comparison) and a link.

Public API: ``results_page(Path("results"))``, then ``page_text(page)`` or
``page.to_dict()`` (the same figures, JSON-friendly).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kvlab.analysis.valid_rows import RowCount
from kvlab.errors import ConfigError
from kvlab.report.results_peers import STEP, crosscheck_headline
from kvlab.store.files import EVALUATION_FILE, MANIFEST_FILE, REPORTS

VALID_SCHEMA = 2  # evaluation.json from which load figures read valid rows only
KV_BENCH_FILE = Path("kv-bench") / "kv-bench.json"
MEMORY_DIR = Path("memory")
RUNS_DIR = Path("runs")
HEADLINE_CONTEXT = 2048  # kv-bench's headline row: naive vs cached decode at 2048 tokens
BATCH_USERS = 8  # the continuous-batching headline: the gain at N = 8 users


@dataclass
class Headline:
    """One step's figure. ``source``: the file it was read from (relative to the
    results folder), None when the step left no file; ``load``: the 1-minute load
    averages the step recorded (at its end; runs: each session's start and stop)."""

    step: str
    text: str
    source: str | None = None
    load: list[float] = field(default_factory=list)


@dataclass
class ResultsPage:
    """The headlines of a results folder, the machine, and every report to link."""

    root: Path
    cpu: str | None
    cores: int | None
    headlines: list[Headline]
    reports: list[str]  # report.html / report.md / plots, relative to root

    @property
    def load_range(self) -> tuple[float, float] | None:
        """Lowest and highest 1-minute load average any step recorded."""
        loads = [x for h in self.headlines for x in h.load]
        return (min(loads), max(loads)) if loads else None

    def machine_line(self) -> str:
        """CPU model, cores and the load during the run, in one sentence."""
        cpu = self.cpu or "CPU not recorded"
        cores = f", {self.cores} logical cores" if self.cores else ""
        span = self.load_range
        load = ("; load average not recorded" if span is None else
                f"; 1-minute load average {span[0]:.2f}–{span[1]:.2f} during the steps "
                f"(on {self.cores or '?'} cores, {self.cores or 'N'} means fully busy)")
        return f"Machine: {cpu}{cores}{load}"

    def to_dict(self) -> dict[str, Any]:
        return {"root": str(self.root), "cpu": self.cpu, "cores": self.cores,
                "load_range": self.load_range, "machine": self.machine_line(),
                "headlines": [asdict(h) for h in self.headlines], "reports": self.reports}


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object, or None when the file is missing or not one (a step cut short)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _one_minute(machine: dict[str, Any] | None) -> list[float]:
    load = (machine or {}).get("load_average")
    return [float(load[0])] if load else []


def kv_bench_headline(step: str, root: Path) -> Headline:
    """Naive vs cached decode per token at 2048 tokens (else the largest context)."""
    doc = _read_json(root / KV_BENCH_FILE)
    if doc is None or not doc.get("rows"):
        return Headline(step, f"no {KV_BENCH_FILE} (step not run)")
    rows = {r["context"]: r for r in doc["rows"]}
    context = HEADLINE_CONTEXT if HEADLINE_CONTEXT in rows else max(rows)
    row, settings = rows[context], doc.get("settings", {})
    model = settings.get("model") or settings.get("preset", "?")
    text = (f"decode per token at {context} tokens ({model}, "
            f"{settings.get('threads', '?')} thread(s)): naive "
            f"{row['naive_decode_s_per_token'] * 1e3:.2f} ms, cached "
            f"{row['cached_decode_s_per_token'] * 1e3:.2f} ms, "
            f"{row['decode_speedup']:.1f}x faster with the cache")
    return Headline(step, text, str(KV_BENCH_FILE), _one_minute(doc.get("machine")))


def _memory_documents(root: Path) -> list[tuple[str, dict[str, Any]]]:
    folder = root / MEMORY_DIR
    found = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [(str(p.relative_to(root)), d) for p in found if (d := _read_json(p)) is not None]


def measured_headline(step: str, root: Path) -> Headline:
    """KV bytes allocated for real against the formula (``kvlab memory --measure``)."""
    for source, doc in _memory_documents(root):
        for model in doc.get("models", []):
            rows = [r for r in model.get("rows", []) if "measured_bytes" in r]
            if doc.get("mode") == "formula" and rows:
                parts = [f"{r['context']} tokens, {r['type_k']}: measured "
                         f"{r['measured_bytes']:,} B "
                         + (f"= formula {r['bytes']:,} B" if r["matches"]
                            else f"DIFFERS from formula {r['bytes']:,} B")
                         for r in rows]
                name = model.get("shape", {}).get("name", "?")
                return Headline(step, f"{name}, " + "; ".join(parts), source,
                                _one_minute(doc.get("machine")))
    return Headline(step, f"no {MEMORY_DIR}/*.json with measured bytes (step not run)")


def paged_headline(step: str, root: Path) -> Headline:
    """Unfilled KV bytes: paged blocks vs contiguous slots (``kvlab memory --paged``)."""
    for source, doc in _memory_documents(root):
        if doc.get("mode") != "paged" or not doc.get("models"):
            continue
        model = doc["models"][0]
        parts = []
        for r in model.get("rows", []):
            fit = (f", {r['max_seqs_paged']} vs {r['max_seqs_contiguous']} sequences fit "
                   f"{r['budget_bytes'] / 2**20:g} MiB" if "max_seqs_paged" in r else "")
            parts.append(f"capacity {r['capacity']}, {len(r['lengths'])} sequences: "
                         f"{r['waste']:.1%} of paged blocks unfilled vs "
                         f"{r['contiguous_unused']:.1%} of contiguous slots unused{fit}")
        name = model.get("shape", {}).get("name", "?")
        block = model["rows"][0]["block"] if model.get("rows") else "?"
        return Headline(step, f"{name}, blocks of {block} tokens: " + "; ".join(parts),
                        source, _one_minute(doc.get("machine")))
    return Headline(step, f"no {MEMORY_DIR}/*.json of a paged cache (step not run)")


@dataclass
class _Run:
    """The latest evaluated run of one experiment; ``source``: its evaluation.json,
    relative to the results folder."""

    source: str
    evaluation: dict[str, Any]
    manifest: dict[str, Any]

    def load(self) -> list[float]:
        """The 1-minute load averages the run's sessions recorded."""
        out = []
        for session in self.manifest.get("sessions", []):
            for key in ("load_average_started", "load_average_stopped"):
                if session.get(key):
                    out.append(float(session[key][0]))
        return out

    def comparison(self, a: str, b: str, metric: str) -> tuple[dict[str, Any], int] | None:
        """The metric of the valid sequential comparison A vs B at the largest capacity."""
        found = [(c["metrics"][metric], c["capacity"])
                 for c in self.evaluation.get("comparisons", [])
                 if c.get("a") == a and c.get("b") == b and c.get("status") == "ok"
                 and c.get("load") is None and metric in c.get("metrics", {})]
        return max(found, key=lambda f: f[1]) if found else None


def _count(data: dict[str, Any] | None) -> str:
    """``12 valid of 16 (refused: 4 failed)`` from an evaluation.json count."""
    return RowCount.from_dict(data).describe(flags=False) if data else "rows not counted"


def _current(read: Callable[[str, _Run], Headline], step: str, run: _Run) -> Headline:
    """``read(step, run)``, or a line saying its evaluation.json predates valid-row figures."""
    if int(run.evaluation.get("schema_version") or 1) >= VALID_SCHEMA:
        return read(step, run)
    return Headline(step, "its evaluation.json counts refused rows in its load figures (schema "
                    "1); rerun kvlab evaluate on the run", run.source, run.load())


def _latest_runs(root: Path) -> dict[str, _Run]:
    """The latest evaluated run of each experiment (run dirs end in a sortable time)."""
    folder = root / RUNS_DIR
    runs: dict[str, _Run] = {}
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        evaluation = _read_json(path / EVALUATION_FILE)
        if evaluation is None:
            continue
        name = str(evaluation.get("experiment") or path.name)
        runs[name] = _Run(str((path / EVALUATION_FILE).relative_to(root)), evaluation,
                          _read_json(path / MANIFEST_FILE) or {})
    return runs


def _ratio_text(metric: dict[str, Any], name_a: str, name_b: str) -> str:
    """"A 12.00 ms vs B 3.00 ms, ratio 4.00 [3.50, 4.60], B faster"."""
    interval = metric.get("interval") or {}
    ci = (f" [{interval['low']:.2f}, {interval['high']:.2f}]"
          if "low" in interval and "high" in interval else "")
    verdict = metric.get("verdict")
    said = ("" if not verdict else ", no detectable difference"
            if verdict == "no detectable difference" else f", {name_b} {verdict}")
    def number(key: str, unit: str = "") -> str:
        value = metric.get(key)
        return "—" if value is None else f"{value:.2f}{unit}"

    return (f"{name_a} {number('mean_a', ' ms')} vs {name_b} {number('mean_b', ' ms')}, "
            f"ratio {number('ratio')}{ci}{said}")


def _pair(step: str, run: _Run, pair: tuple[str, str], metric: str, label: str,
          names: tuple[str, str]) -> Headline:
    found = run.comparison(*pair, metric)
    if found is None:
        return Headline(step, f"no valid {pair[0]} vs {pair[1]} comparison", run.source,
                        run.load())
    values, capacity = found
    counts = next((f"; A {_count(p['count_a'])}, B {_count(p['count_b'])}"
                   for p in run.evaluation["intervals"]["pairs"] if (p["mode_a"], p["mode_b"],
                   p["capacity"], p["load"]) == (*pair, capacity, None)), "")
    return Headline(step, f"{label} at capacity {capacity}: " + _ratio_text(values, *names)
                    + counts, run.source, run.load())


def quickstart_headline(step: str, run: _Run) -> Headline:
    """Mean effective ITL of recompute vs KV cache on the embedded toy server."""
    return _pair(step, run, ("recompute", "kv-cache"), "itl_effective_ms", "ITL",
                 ("recompute", "KV cache"))


def engine_headline(step: str, run: _Run) -> Headline:
    """Mean effective ITL of the engine (KV cache) vs llama-server on Gemma 3 270M."""
    return _pair(step, run, ("kv-cache", "llama-server"), "itl_effective_ms", "ITL",
                 ("engine", "llama-server"))


def batching_headline(step: str, run: _Run) -> Headline:
    """Valid output tokens/s at N = 8 users: continuous batching over one slot."""
    label = f"c={BATCH_USERS}"
    points = {p.get("mode"): p for p in run.evaluation.get("load", []) if p.get("load") == label}
    one = (points.get("one-slot") or {}).get("output_tokens_per_s")
    many = (points.get("batching") or {}).get("output_tokens_per_s")
    if not one or many is None:
        return Headline(step, f"no {label} point with output tokens/s for both modes",
                        run.source, run.load())
    return Headline(step, f"output tokens/s at N = {BATCH_USERS} users: one slot {one:.1f} "
                          f"({_count(points['one-slot'].get('count'))}), batching "
                          f"{many:.1f} ({_count(points['batching'].get('count'))}): "
                          f"{many / one:.2f}x", run.source, run.load())


def notebook_headline(step: str, run: _Run) -> Headline:
    """Median TTFT and effective ITL per prompt length on the launched vLLM, and
    whether its rows were shown free of prefix reuse."""
    cells = sorted((s for s in run.evaluation.get("summaries", []) if s.get("queries")),
                   key=lambda s: s["capacity"])
    if not cells:
        return Headline(step, "no valid rows", run.source, run.load())
    valid = "; ".join(_count(s["valid"]) for s in cells)
    lengths = " / ".join(f"{s['mean_prompt_tokens']:.0f}" for s in cells)
    ttft = " / ".join(f"{s['ttft_ms']['median']:.0f}" for s in cells)
    itl = " / ".join(f"{s['itl_effective_ms']['median']:.1f}" for s in cells)
    reuse = "; ".join(f"prefix reuse {p['status']}"
                      for p in run.evaluation.get("prefix_reuse", []))
    return Headline(step, f"at {lengths} prompt tokens: TTFT {ttft} ms, effective ITL "
                          f"{itl} ms (medians; rows {valid}); {reuse}", run.source, run.load())


def servers_headline(step: str, run: _Run) -> Headline:
    """Valid output tokens/s of every server at N = 8 users, kvlab serve's share of vLLM's."""
    label = f"c={BATCH_USERS}"
    points = {p["mode"]: p for p in run.evaluation.get("load", []) if p.get("load") == label}
    rates = {mode: p.get("output_tokens_per_s") for mode, p in points.items()}
    if not rates or any(v is None for v in rates.values()):
        return Headline(step, f"no {label} point with output tokens/s for every server",
                        run.source, run.load())
    text = ", ".join(f"{mode} {rate:.1f} ({_count(points[mode].get('count'))})"
                     for mode, rate in rates.items())
    if rates.get("vllm") and rates.get("kvlab-serve") is not None:
        text += f"; kvlab serve / vLLM = {rates['kvlab-serve'] / rates['vllm']:.2f}x"
    return Headline(step, f"output tokens/s at N = {BATCH_USERS} users: {text}",
                    run.source, run.load())


def other_run_headline(step: str, run: _Run) -> Headline:
    """A run the page has no headline for: mean e2e of its first valid comparison."""
    pairs = [(c["a"], c["b"]) for c in run.evaluation.get("comparisons", [])
             if c.get("status") == "ok" and c.get("load") is None]
    if not pairs:
        return Headline(step, "no valid comparison", run.source, run.load())
    return _pair(step, run, pairs[0], "e2e_ms", "e2e", pairs[0])


# The runs of make run with a headline of their own: experiment -> (step, reader).
RUN_HEADLINES: dict[str, tuple[str, Callable[[str, _Run], Headline]]] = {
    "quickstart": ("Recompute vs KV cache, embedded server", quickstart_headline),
    "gemma-embedded-vs-llamacpp": ("Engine vs llama-server, Gemma 3 270M", engine_headline),
    "continuous-batching": ("Continuous batching vs one slot", batching_headline),
    "vllm-notebook": ("The notebook's section 6 on a launched vLLM", notebook_headline),
    "serving-engines": ("vLLM vs llama-server vs kvlab serve", servers_headline),
}


def _reports(root: Path) -> list[str]:
    """Every report and plot under ``root``: report.html (else report.md) of each run,
    kv-bench's PNG, and the memory files."""
    found: list[Path] = []
    for run in sorted((root / RUNS_DIR).iterdir()) if (root / RUNS_DIR).is_dir() else []:
        for name in REPORTS:
            if (run / name).is_file():
                found.append(run / name)
                break
    found += sorted(p for p in (root / KV_BENCH_FILE).parent.glob("*.png"))
    found += sorted((root / MEMORY_DIR).glob("*.json"))
    return [str(p.relative_to(root)) for p in found]


def _machine(root: Path, runs: dict[str, _Run]) -> tuple[str | None, int | None]:
    """CPU model and cores, from the first step file that recorded them."""
    sources = [(_read_json(root / KV_BENCH_FILE) or {}).get("machine")]
    sources += [d.get("machine") for _, d in _memory_documents(root)]
    sources += [r.manifest.get("host") for r in runs.values()]
    for machine in sources:
        if machine and machine.get("cpu"):
            return machine["cpu"], machine.get("cores")
    return None, None


def _guarded(step: str, read: Callable[[str], Headline]) -> Headline:
    """``read(step)``; a file of another shape (an older kvlab, a hand edit) gives a line
    saying so instead of a traceback."""
    try:
        return read(step)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        return Headline(step, f"its file lacks what this page reads ({type(exc).__name__}: "
                              f"{exc}); rerun the step")


def results_page(root: Path) -> ResultsPage:
    """Read every step's files under ``root`` into one page (ConfigError if ``root`` is
    not a folder). Headlines come in ``make run``'s order; missing steps say so."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root}: no such folder; give the folder make run wrote "
                          "(results/ by default)")
    runs = _latest_runs(root)

    def of_run(name: str) -> Headline:
        step, read = RUN_HEADLINES[name]
        step = f"{step} ({name})"
        if name not in runs:
            return Headline(step, f"no {RUNS_DIR}/{name}-*/evaluation.json (step not run)")
        run = runs[name]
        return _guarded(step, lambda s: _current(read, s, run))

    others = [_guarded(name, partial(_current, other_run_headline, run=run))
              for name, run in runs.items() if name not in RUN_HEADLINES]
    # make run's order: quick steps first, then the runs, vLLM's last
    headlines = [
        _guarded("KV cache in the engine (kvlab kv-bench)",
                 partial(kv_bench_headline, root=root)),
        _guarded("KV bytes, measured vs formula (kvlab memory --measure)",
                 partial(measured_headline, root=root)),
        of_run("quickstart"), of_run("gemma-embedded-vs-llamacpp"), *others,
        _guarded("Paged vs contiguous KV (kvlab memory --paged)",
                 partial(paged_headline, root=root)),
        of_run("continuous-batching"), of_run("vllm-notebook"), of_run("serving-engines"),
        _guarded(STEP, lambda _: Headline(*crosscheck_headline(root))),
    ]
    cpu, cores = _machine(root, runs)
    return ResultsPage(root, cpu, cores, headlines, _reports(root))


def page_text(page: ResultsPage) -> str:
    """The page as plain lines (one per step) that read the same in a log."""
    lines = [f"Results in {page.root}/", page.machine_line()]
    for h in page.headlines:
        where = f" [{h.source}]" if h.source else ""
        lines.append(f"- {h.step}: {h.text}{where}")
    return "\n".join(lines)
