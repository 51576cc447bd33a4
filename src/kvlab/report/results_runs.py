"""The results page's line for each run: the headline figure of each experiment of
``make run``, read typed from the run's evaluation.json
(:class:`~kvlab.analysis.evaluation_file.StoredEvaluation`) and its manifest.json
(:class:`~kvlab.store.state.RunState`). A figure a run cannot give says why in its line;
an evaluation.json that does not read gets a line saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kvlab.analysis.evaluation_file import EvaluationFileError, Ratio, StoredEvaluation
from kvlab.analysis.load import LoadSummary
from kvlab.analysis.summaries import Summary
from kvlab.analysis.valid_rows import RowCount
from kvlab.errors import ConfigError
from kvlab.store.files import EVALUATION_FILE, MANIFEST_FILE
from kvlab.store.state import RunState

RUNS_DIR = Path("runs")
BATCH_USERS = 8  # the continuous-batching headline: the gain at N = 8 users


@dataclass
class Headline:
    """One step's figure. ``source``: the file it was read from (relative to the
    results folder), None when the step left no file; ``load``: the 1-minute load
    averages the step recorded (at its end; runs: each invocation's start and stop)."""

    step: str
    text: str
    source: str | None = None
    load: list[float] = field(default_factory=list)



@dataclass
class RunFiles:
    """The latest evaluated run of one experiment; ``source``: its evaluation.json,
    relative to the results folder."""

    source: str
    evaluation: StoredEvaluation
    state: RunState

    def load(self) -> list[float]:
        """The 1-minute load averages the run's invocations recorded."""
        return [float(load[0]) for s in self.state.invocations
                for load in (s.load_average_started, s.load_average_stopped) if load]

    def comparison(self, a: str, b: str, metric: str) -> tuple[Ratio, int] | None:
        """The metric of the valid sequential comparison A vs B at the largest capacity."""
        found = [(c.metrics[metric], c.capacity) for c in self.evaluation.comparisons
                 if (c.a, c.b, c.status, c.load) == (a, b, "ok", None) and metric in c.metrics]
        return max(found, key=lambda f: f[1]) if found else None

    def points(self, label: str) -> dict[str, LoadSummary]:
        """Each mode's load point ``label``."""
        return {p.mode: p for p in self.evaluation.load if p.load == label}


def _count(count: RowCount) -> str:
    """``12 valid of 16 (refused: 4 failed)``."""
    return count.describe(flags=False) if count.measured else "rows not counted"


def current(read: Callable[[str, RunFiles], Headline], step: str, run: RunFiles) -> Headline:
    """``read(step, run)``, or a line saying its evaluation.json predates valid-row figures."""
    if not run.evaluation.counts_refused_rows:
        return read(step, run)
    return Headline(step, "its evaluation.json counts refused rows in its load figures (schema "
                    "1); rerun kvlab evaluate on the run", run.source, run.load())


def latest_runs(root: Path) -> tuple[dict[str, RunFiles], list[Headline]]:
    """The latest evaluated run of each experiment (run dirs end in a sortable time), and
    a line for each evaluation.json that does not read (saying why)."""
    folder = root / RUNS_DIR
    runs: dict[str, RunFiles] = {}
    unread: list[Headline] = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        file = path / EVALUATION_FILE
        if not file.is_file():
            continue
        source = str(file.relative_to(root))
        try:
            evaluation = StoredEvaluation.read(file)
        except EvaluationFileError as exc:
            unread.append(Headline(path.name, str(exc).replace(str(file), source), source))
            continue
        try:
            state = RunState.read(path / MANIFEST_FILE)
        except ConfigError:  # a damaged manifest: the run's load averages are not known
            state = RunState()
        runs[evaluation.experiment or path.name] = RunFiles(source, evaluation, state)
    return runs, unread


def _ratio_text(metric: Ratio, name_a: str, name_b: str) -> str:
    """"A 12.00 ms vs B 3.00 ms, ratio 4.00 [3.50, 4.60], B faster"."""
    interval = metric.interval
    ci = f" [{interval.low:.2f}, {interval.high:.2f}]" if interval else ""
    verdict = metric.verdict
    said = ("" if not verdict else ", no detectable difference"
            if verdict == "no detectable difference" else f", {name_b} {verdict}")

    def number(value: float | None, unit: str = "") -> str:
        return "—" if value is None else f"{value:.2f}{unit}"

    return (f"{name_a} {number(metric.mean_a, ' ms')} vs {name_b} "
            f"{number(metric.mean_b, ' ms')}, ratio {number(metric.ratio)}{ci}{said}")


def _pair(step: str, run: RunFiles, pair: tuple[str, str], metric: str, label: str,
          names: tuple[str, str]) -> Headline:
    found = run.comparison(*pair, metric)
    if found is None:
        return Headline(step, f"no valid {pair[0]} vs {pair[1]} comparison", run.source,
                        run.load())
    values, capacity = found
    stored = run.evaluation.pair(*pair, capacity, None)
    counts = ("" if stored is None else
              f"; A {_count(stored.count_a)}, B {_count(stored.count_b)}")
    return Headline(step, f"{label} at capacity {capacity}: " + _ratio_text(values, *names)
                    + counts, run.source, run.load())


def quickstart_headline(step: str, run: RunFiles) -> Headline:
    """Mean effective ITL of recompute vs KV cache on the embedded toy server."""
    return _pair(step, run, ("recompute", "kv-cache"), "itl_effective_ms", "ITL",
                 ("recompute", "KV cache"))


def engine_headline(step: str, run: RunFiles) -> Headline:
    """Mean effective ITL of the engine (KV cache) vs llama-server on Gemma 3 270M."""
    return _pair(step, run, ("kv-cache", "llama-server"), "itl_effective_ms", "ITL",
                 ("engine", "llama-server"))


def batching_headline(step: str, run: RunFiles) -> Headline:
    """Valid output tokens/s at N = 8 users: continuous batching over one slot."""
    label = f"c={BATCH_USERS}"
    points = run.points(label)
    one, many = points.get("one-slot"), points.get("batching")
    if one is None or many is None or not one.output_tokens_per_s \
            or many.output_tokens_per_s is None:
        return Headline(step, f"no {label} point with output tokens/s for both modes",
                        run.source, run.load())
    return Headline(step, f"output tokens/s at N = {BATCH_USERS} users: one slot "
                          f"{one.output_tokens_per_s:.1f} ({_count(one.count)}), batching "
                          f"{many.output_tokens_per_s:.1f} ({_count(many.count)}): "
                          f"{many.output_tokens_per_s / one.output_tokens_per_s:.2f}x",
                    run.source, run.load())


def _medians(cells: list[Summary], metric: str, digits: int) -> str | None:
    """`` / ``-joined medians of ``metric`` (ms), None when a cell lacks it."""
    found = [s.metrics[metric].median if metric in s.metrics else None for s in cells]
    if any(m is None for m in found):
        return None
    return " / ".join(f"{m:.{digits}f}" for m in found if m is not None)


def notebook_headline(step: str, run: RunFiles) -> Headline:
    """Median TTFT and effective ITL per prompt length on the launched vLLM, and
    whether its rows were shown free of prefix reuse."""
    cells = sorted((s for s in run.evaluation.summaries if s.queries),
                   key=lambda s: s.capacity)
    if not cells:
        return Headline(step, "no valid rows", run.source, run.load())
    ttft, itl = _medians(cells, "ttft_ms", 0), _medians(cells, "itl_effective_ms", 1)
    lengths = [s.figure("mean_prompt_tokens") for s in cells]
    if ttft is None or itl is None or any(n is None for n in lengths):
        return Headline(step, "a cell with valid rows has no TTFT, ITL or prompt length",
                        run.source, run.load())
    valid = "; ".join(_count(s.count) for s in cells)
    said = " / ".join(f"{n:.0f}" for n in lengths if n is not None)
    reuse = "; ".join(f"prefix reuse {p.status}" for p in run.evaluation.prefix_reuse)
    return Headline(step, f"at {said} prompt tokens: TTFT {ttft} ms, effective ITL "
                          f"{itl} ms (medians; rows {valid}); {reuse}", run.source, run.load())


def servers_headline(step: str, run: RunFiles) -> Headline:
    """Valid output tokens/s of every server at N = 8 users, kvlab serve's share of vLLM's."""
    label = f"c={BATCH_USERS}"
    points = run.points(label)
    rates = {mode: p.output_tokens_per_s for mode, p in points.items()}
    if not rates or any(v is None for v in rates.values()):
        return Headline(step, f"no {label} point with output tokens/s for every server",
                        run.source, run.load())
    text = ", ".join(f"{mode} {rate:.1f} ({_count(points[mode].count)})"
                     for mode, rate in rates.items() if rate is not None)
    vllm, ours = rates.get("vllm"), rates.get("kvlab-serve")
    if vllm and ours is not None:
        text += f"; kvlab serve / vLLM = {ours / vllm:.2f}x"
    return Headline(step, f"output tokens/s at N = {BATCH_USERS} users: {text}",
                    run.source, run.load())


def other_run_headline(step: str, run: RunFiles) -> Headline:
    """A run the page has no headline for: mean e2e of its first valid comparison."""
    pairs = [(c.a, c.b) for c in run.evaluation.comparisons
             if c.status == "ok" and c.load is None]
    if not pairs:
        return Headline(step, "no valid comparison", run.source, run.load())
    return _pair(step, run, pairs[0], "e2e_ms", "e2e", pairs[0])


# The runs of make run with a headline of their own: experiment -> (step, reader).
RUN_HEADLINES: dict[str, tuple[str, Callable[[str, RunFiles], Headline]]] = {
    "quickstart": ("Recompute vs KV cache, embedded server", quickstart_headline),
    "gemma-embedded-vs-llamacpp": ("Engine vs llama-server, Gemma 3 270M", engine_headline),
    "continuous-batching": ("Continuous batching vs one slot", batching_headline),
    "vllm-notebook": ("The notebook's section 6 on a launched vLLM", notebook_headline),
    "serving-engines": ("vLLM vs llama-server vs kvlab serve", servers_headline),
}
