"""One page of results: the headline figure of each step of ``make run``, read from
the files the steps wrote (never retyped), and the machine they ran on.

A results folder (``make run`` writes ``results/``) holds:

- ``kv-bench/kv-bench.json``: naive vs cached decode per token (``kvlab kv-bench``);
- ``memory/*.json``: KV bytes by formula, measured, paged (``kvlab memory --out``);
- ``runs/<experiment>-<time>/``: run directories with ``evaluation.json`` and reports
  (the vLLM steps, ``vllm-notebook`` and ``serving-engines``, included).

Each step's file also records the machine (CPU, cores) and the load average at the
step's end (runs: at each invocation's start and stop). A run's figure says what it
stands on ("n valid of m"); an evaluation.json older than that is named, not read. A
step whose file is missing gets a line saying so. Runs of experiments the page has no
headline for still get a line (their first comparison) and a link.

Public API: ``results_page(Path("results"))``, then ``page_text(page)`` or
``page.to_dict()`` (the same figures, JSON-friendly).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kvlab.errors import ConfigError
from kvlab.report.results_peers import crosscheck_headline
from kvlab.report.results_runs import (
    RUN_HEADLINES,
    RUNS_DIR,
    Headline,
    RunFiles,
    current,
    latest_runs,
    other_run_headline,
)
from kvlab.report.results_steps import (
    KV_BENCH_FILE,
    MEMORY_DIR,
    Machine,
    kv_bench_headline,
    measured_headline,
    paged_headline,
    step_machines,
)
from kvlab.store.files import EVALUATION_FILE, REPORTS


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
    machines = [m for m in step_machines(root) if m.cpu]
    machines += [Machine(cpu=r.state.machine.cpu, cores=r.state.machine.cores)
                 for r in runs.values() if r.state.machine.cpu]
    return (machines[0].cpu, machines[0].cores) if machines else (None, None)


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
        kv_bench_headline("KV cache in the engine (kvlab kv-bench)", root),
        measured_headline("KV bytes, measured vs formula (kvlab memory --measure)", root),
        of_run("quickstart"), of_run("gemma-embedded-vs-llamacpp"), *others,
        paged_headline("Paged vs contiguous KV (kvlab memory --paged)", root),
        of_run("continuous-batching"), of_run("vllm-notebook"), of_run("serving-engines"),
        Headline(*crosscheck_headline(root)),
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
