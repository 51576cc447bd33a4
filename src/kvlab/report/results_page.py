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
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kvlab.errors import ConfigError
from kvlab.report.results_peers import STEP, crosscheck_headline
from kvlab.report.results_runs import (
    RUN_HEADLINES,
    RUNS_DIR,
    Headline,
    RunFiles,
    current,
    latest_runs,
    other_run_headline,
)
from kvlab.store.files import EVALUATION_FILE, REPORTS

KV_BENCH_FILE = Path("kv-bench") / "kv-bench.json"
MEMORY_DIR = Path("memory")
HEADLINE_CONTEXT = 2048  # kv-bench's headline row: naive vs cached decode at 2048 tokens


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


def _machine(root: Path, runs: dict[str, RunFiles]) -> tuple[str | None, int | None]:
    """CPU model and cores, from the first step file that recorded them."""
    sources = [(_read_json(root / KV_BENCH_FILE) or {}).get("machine")]
    sources += [d.get("machine") for _, d in _memory_documents(root)]
    for machine in sources:
        if machine and machine.get("cpu"):
            return machine["cpu"], machine.get("cores")
    hosts = [r.state.machine for r in runs.values()]
    return next(((h.cpu, h.cores) for h in hosts if h.cpu), (None, None))


def _guarded(step: str, read: Callable[[str], Headline]) -> Headline:
    """``read(step)`` of a step file outside a run directory (kv-bench, memory, the
    cross-check), read by hand: a file of another shape (an older kvlab, a hand edit)
    gives a line saying so instead of a traceback."""
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
    runs, unread = latest_runs(root)

    def of_run(name: str) -> Headline:
        step, read = RUN_HEADLINES[name]
        step = f"{step} ({name})"
        if name not in runs:
            return Headline(step, f"no {RUNS_DIR}/{name}-*/{EVALUATION_FILE} (step not run)")
        return current(read, step, runs[name])

    others = [current(other_run_headline, name, run)
              for name, run in runs.items() if name not in RUN_HEADLINES] + unread
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
