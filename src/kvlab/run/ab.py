"""``kvlab ab``: a baseline and a candidate on one machine, until the verdict is decided.

Both servers are brought up at once (the run's own launch machinery: :class:`Executor`'s
``Launch`` and ``WarmUp`` steps), then requests go in ABBA blocks: a block of ``block``
rows per side sends the first half of its prompts to A then B, the second half to B
then A, so both sides of a block share its prompts and its moment (a linear drift
cancels inside the block). After each block the sequential test
(:mod:`kvlab.analysis.sequential`) looks at the blocks' ``ln(mean_B / mean_A)`` of
the chosen metric over valid rows; it stops at the first look that decides *regress*
or *pass* at the declared error rates, or when the budget of rows (or of time) is
spent: *inconclusive*. Every row sent is kept: the run directory is an ordinary run
(``records.jsonl``, ``manifest.json``, ``experiment.toml``, ``evaluation.json`` and
``report.md`` with the A/B comparison) plus ``ab.json``, the design and every look.

Public API::

    result = run_ab(AbRequest(Path("experiments/engine-serving.toml"),
                              mode_a="kvlab-float32", mode_b="kvlab-int8"))
    result.verdict, result.rows, result.exit_code   # 0 pass, 1 regress, 2, 3
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kvlab.analysis.gate import DEFAULT_MARGIN
from kvlab.analysis.sequential import Design, Look, block_log_ratio, look
from kvlab.analysis.summary_metrics import SUMMARY_METRICS
from kvlab.analysis.validate import check_row
from kvlab.bench.drivers.inprocess import InProcessSettings
from kvlab.errors import ConfigError, RunInterrupted, WorkerError
from kvlab.records import Record
from kvlab.run.ab_setup import AbPair, make_pair
from kvlab.run.executor import Executor, ServerDied
from kvlab.run.interrupt import run_interruptibly
from kvlab.run.journal import Journal
from kvlab.run.overrides import Setting
from kvlab.run.planner import Done, build_plan
from kvlab.run.reporter import Reporter, SilentReporter
from kvlab.run.rundir import create_run
from kvlab.run.runplan import Launch, MeasureRows, Row, RunPlan, WarmUp
from kvlab.store.files import AB_FILE

__all__ = ["AB_FILE", "AbRequest", "AbResult", "block_rows", "run_ab"]

AbVerdict = Literal["pass", "regress", "inconclusive", "not judged"]
EXIT_CODES: dict[str, int] = {"pass": 0, "regress": 1, "not judged": 2, "inconclusive": 3}
ROW_METRICS = {m.name: m for m in SUMMARY_METRICS if m.row is not None and m.compared}


@dataclass(frozen=True)
class AbRequest:
    """What to compare and how long to try.

    ``baseline`` (A) and ``candidate`` (B, None: a second mode of ``baseline``) are
    experiment files; ``mode_a``/``mode_b`` their modes (needed where a file has
    several); ``capacity``: the one measured (default: the smallest). ``metric``: a
    time of each row (``e2e_ms``, ``itl_effective_ms``, ...); ``margin``, ``alpha``,
    ``beta``: see :class:`~kvlab.analysis.sequential.Design`. ``block``: rows per side
    in one ABBA block (even); ``max_rows``: the budget, both sides' rows together;
    ``max_time_s``: a budget of time (None: none). ``report``: write evaluation.json
    and report.md when done."""

    baseline: Path
    candidate: Path | None = None
    mode_a: str | None = None
    mode_b: str | None = None
    capacity: int | None = None
    settings: tuple[Setting, ...] = ()
    metric: str = "e2e_ms"
    margin: float = DEFAULT_MARGIN
    alpha: float = 0.05
    beta: float = 0.05
    block: int = 4
    max_rows: int = 320
    min_blocks: int = 4
    max_time_s: float | None = None
    report: bool = True

    def design(self) -> Design:
        """The sequential test this request declares (ConfigError for a bad value)."""
        if self.block < 2 or self.block % 2:
            raise ConfigError(f"--block {self.block}: give an even number of rows per side "
                              "(ABBA: half of them before the other side, half after)")
        if self.metric not in ROW_METRICS:
            raise ConfigError(f"--metric {self.metric}: not one of "
                              f"{', '.join(ROW_METRICS)}")
        if self.max_time_s is not None and self.max_time_s <= 0:
            raise ConfigError(f"--max-time {self.max_time_s:g}: give a positive time (s)")
        return Design(self.margin, self.alpha, self.beta,
                      max_blocks=self.max_rows // (2 * self.block), min_blocks=self.min_blocks)


@dataclass
class AbResult:
    """What an A/B decided: ``verdict`` (``why`` says what ended it), the look that
    ended it (None: none was reached), every look, the rows sent (both sides, measured
    rows) and the blocks whose ratio was lost (a side without a valid row)."""

    run_dir: Path
    a: str
    b: str
    capacity: int
    metric: str
    design: Design
    verdict: AbVerdict = "not judged"
    why: str = ""
    last: Look | None = None
    looks: list[Look] = field(default_factory=list)
    rows: int = 0
    valid_rows: int = 0
    blocks: int = 0
    lost_blocks: int = 0
    elapsed_s: float = 0.0

    @property
    def exit_code(self) -> int:
        """0 pass, 1 regress, 2 not judged, 3 inconclusive (the gate's codes)."""
        return EXIT_CODES[self.verdict]

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir), "a": self.a, "b": self.b,
            "capacity": self.capacity, "metric": self.metric,
            "design": self.design.to_dict(), "verdict": self.verdict, "why": self.why,
            "exit_code": self.exit_code, "rows": self.rows, "valid_rows": self.valid_rows,
            "blocks": self.blocks, "lost_blocks": self.lost_blocks,
            "elapsed_s": round(self.elapsed_s, 3),
            "last": self.last.to_dict() if self.last else None,
            "looks": [x.to_dict() for x in self.looks],
        }

    def lines(self) -> list[str]:
        """The verdict for a reader: what was compared, the verdict, rows, margin."""
        d = self.design
        out = [f"A = {self.a}, B = {self.b} @ {self.capacity}: {self.metric}, margin "
               f"{d.margin:.1%}, alpha {d.alpha:g}, beta {d.beta:g}, budget "
               f"{d.max_blocks} blocks"]
        if self.last is not None:
            x = self.last
            out.append(f"B/A = {x.b_over_a:.3f}, interval {x.low:.3f}–{x.high:.3f} (regress "
                       f"above {1 + d.margin:.3f} for its whole interval, pass below)")
            out.append(f"resolves a departure of {x.detectable:.1%} from the margin "
                       f"(power {1 - d.beta:.0%}) at {x.blocks} blocks")
        out.append(f"rows spent: {self.rows} ({self.valid_rows} valid) in {self.blocks} "
                   f"blocks, {self.elapsed_s:.1f} s; lost blocks: {self.lost_blocks}")
        out.append(f"verdict: {self.verdict}" + (f" ({self.why})" if self.why else ""))
        return out


class AbJournal(Journal):
    """The run's journal, also keeping the measured records in memory for the test."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.measured: list[Record] = []

    def land(self, record: Record) -> None:
        super().land(record)
        if not record.warmup:
            self.measured.append(record)


def block_rows(a: str, b: str, query_ids: list[str], index: int, per_side: int
               ) -> tuple[Row, ...]:
    """Block ``index``'s rows in ABBA order: its prompts (the dataset's, in turn) split
    in halves; A then B on the first half, B then A on the second. A row's repetition
    counts the times its query came round, so no two rows of a side share a key."""
    half = per_side // 2
    first = index * per_side

    def rows(mode: str, start: int) -> list[Row]:
        return [Row(mode, k // len(query_ids), query_ids[k % len(query_ids)])
                for k in range(first + start, first + start + half)]

    return (*rows(a, 0), *rows(b, 0), *rows(b, half), *rows(a, half))


def _values(records: list[Record], mode: str, metric: Callable[[Record], float | None]
            ) -> list[float]:
    """The metric of each valid row of ``mode`` (validation's rule: no refused row)."""
    out = []
    for record in records:
        if record.mode == mode and not check_row(record):
            value = metric(record)
            if value is not None and value > 0:
                out.append(value)
    return out


class AbRun:
    """One A/B over one run directory: its plan, journal and the test's state."""

    def __init__(self, request: AbRequest, pair: AbPair, plan: RunPlan, journal: AbJournal,
                 result: AbResult) -> None:
        self.request, self.pair, self.plan, self.journal = request, pair, plan, journal
        self.result = result
        row = ROW_METRICS[request.metric].row
        assert row is not None
        self.metric: Callable[[Record], float | None] = row
        self.ratios: list[float] = []

    async def run(self, executor: Executor) -> None:
        """Servers up, then blocks until a look decides or a budget is spent; every
        server is stopped on every exit path."""
        journal, result, design = self.journal, self.result, self.result.design
        # the rows are open-ended: the test decides when to stop (None: not counted)
        journal.state.rows_planned = [(mode, self.pair.capacity, None, None)
                                      for mode in (self.pair.a, self.pair.b)]
        invocation = journal.begin_invocation(self.plan, None)
        ids = [q.id for q in self.plan.workload.queries]
        try:
            for step in self.plan.steps:
                await executor.take(step)
            started = time.monotonic()
            while True:
                index = result.blocks
                rows = block_rows(self.pair.a, self.pair.b, ids, index, self.request.block)
                before = len(journal.measured)
                await executor.take(MeasureRows(self.pair.capacity, rows,
                                                f"{self.pair.a}+{self.pair.b}",
                                                interleaved=True))
                result.blocks += 1
                result.elapsed_s = time.monotonic() - started
                self.add_block(journal.measured[before:])
                if result.verdict != "not judged" or result.why:
                    break
                limit = self.request.max_time_s
                if limit is not None and result.elapsed_s >= limit and \
                        result.blocks < design.max_blocks:
                    result.verdict = "inconclusive"
                    result.why = f"time budget of {limit:g} s spent"
                    break
        finally:
            for mode, capacity in reversed(list(executor.live)):
                executor.stop(mode, capacity)
            await executor.driver.aclose()
        journal.end_invocation(invocation)

    def add_block(self, records: list[Record]) -> None:
        """Take one block's records into the test; sets the verdict when it ends."""
        result, design = self.result, self.result.design
        a = _values(records, self.pair.a, self.metric)
        b = _values(records, self.pair.b, self.metric)
        result.rows += len(records)
        result.valid_rows += len(a) + len(b)
        ratio = block_log_ratio(a, b)
        if ratio is None:
            result.lost_blocks += 1
            if result.lost_blocks >= 2 and result.lost_blocks * 4 > result.blocks:
                result.why = (f"{result.lost_blocks} of {result.blocks} blocks have no valid "
                              f"{result.metric} row on a side (see report.md's validation)")
                return
        else:
            self.ratios.append(ratio)
        if len(self.ratios) >= design.min_blocks:
            now = look(design, self.ratios)
            result.looks.append(now)
            result.last = now
            self.journal.reporter.note(
                f"block {result.blocks}: B/A {now.b_over_a:.3f} "
                f"[{now.low:.3f}, {now.high:.3f}] against {1 + design.margin:.3f}: "
                f"{now.verdict}")
            if now.verdict != "continue":
                result.verdict = now.verdict
                result.why = ("budget of rows spent" if now.verdict == "inconclusive"
                              else f"decided at look {len(result.looks)}")
                return
        if result.blocks >= design.max_blocks + design.max_blocks // 4:
            result.why = "budget of rows spent with too few valid blocks"


def _new_run(out: Path, pair: AbPair) -> Path:
    """A fresh run directory holding the pair's experiment (its text as the file)."""
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / f"{pair.experiment.name}.toml"
        source.write_text(pair.text, encoding="utf-8")
        return create_run(out, source, pair.experiment).path


def run_ab(request: AbRequest, out: Path = Path("runs"),
           reporter: Reporter | None = None) -> AbResult:
    """Measure A against B until decided (see the module's docstring). Ctrl-C or a dead
    server raises RunInterrupted; the records sent are kept either way."""
    design = request.design()
    pair = make_pair(request.baseline, request.candidate, request.mode_a, request.mode_b,
                     request.capacity, request.settings)
    experiment = pair.experiment
    full = build_plan(experiment, experiment.workload.source(), Done(),
                      tokenizer=experiment.workload.tokenizer, attach=None,
                      asked=InProcessSettings(), overrides={}, repeat_aa=None)
    setup = tuple(s for s in full.steps if isinstance(s, Launch | WarmUp))
    plan = dataclasses.replace(full, steps=setup)
    from kvlab.store.rundir import RunDir

    run = RunDir.open(_new_run(out, pair))
    run.state.tokenizer = plan.workload.tokenizer
    journal = AbJournal(run, reporter or SilentReporter())
    result = AbResult(run.path, pair.a, pair.b, pair.capacity, request.metric, design)
    ab = AbRun(request, pair, plan, journal, result)
    driver = plan.driver.build()
    interrupted: tuple[str, int] | None = None
    try:
        driver.start()
        run_interruptibly(ab.run(Executor(plan, journal, driver)))
    except KeyboardInterrupt:
        interrupted = ("interrupted", 130)
    except (ServerDied, WorkerError) as exc:
        interrupted = (f"interrupted ({exc})", 2)
    finally:
        try:
            driver.close()
        finally:
            if interrupted is not None:
                result.verdict, result.why = "not judged", interrupted[0]
            journal.writer.save_text(AB_FILE, json.dumps(result.to_json(), indent=1))
            journal.close()
    if interrupted is not None:
        raise RunInterrupted(f"{interrupted[0]}: {result.rows} rows kept in {run.path}",
                             exit_status=interrupted[1])
    if request.report:
        from kvlab.run.runner import evaluate_run

        evaluate_run(run.path)
    return result
