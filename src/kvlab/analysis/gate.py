"""A CI gate on a comparison of runs, with stated error rates (issue 37).

``kvlab compare A B --fail-on RULE`` (A the baseline, B the candidate; either side one
run or several) judges A's whole plan:

- every (mode, capacity, load) cell A measured must be measured and finished in B: a
  cell B lacks, or did not finish, fails the gate, named with "k of n planned"
  (``allow_missing``: listed, not failed);
- ``slower[:metric[:margin%]]`` (default ``e2e_ms`` at ``DEFAULT_MARGIN``): B/A of the
  metric's means, by a hierarchical bootstrap (runs, then rows,
  :mod:`~kvlab.analysis.gate_stats`). Three verdicts: *regress* when B is slower than
  1 + margin beyond doubt, *pass* when B is faster than 1 + margin beyond doubt, else
  *inconclusive*. Each states the smallest slowdown it could have detected;
- ``failures[:threshold%]``: B's valid share (valid rows / rows planned, see
  :class:`~kvlab.analysis.valid_rows.RowCount`) below A's by more than ``threshold``
  points. On by default.

Error rates: the slower checks of all cells and metrics are one family; Holm's
step-down keeps the chance of any false *regress* at most ``alpha`` (default 5 %), and
of any false *pass* at most ``alpha``, when the interval's between-run part is right:
several runs per side, or a noise floor measured by ``kvlab floor``. Without either
the verdict says "no noise floor known" (rows only: the error rate is not stated).

Exit codes (:attr:`GateResult.exit_code`): 1 a regression, a failures rule or a
missing cell; 2 a check not judged (``accept_unjudged``: listed, not counted); 3
inconclusive (``inconclusive_ok``: 0); 0 every check passed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from kvlab.analysis.gate_stats import RatioEstimate, detectable, hierarchical_ratio, holm
from kvlab.analysis.summary_metrics import COMPARED_METRICS
from kvlab.analysis.valid_rows import RowCount, ValidRows
from kvlab.analysis.validate import Reason, check_pairs
from kvlab.errors import ConfigError

METRICS: tuple[str, ...] = tuple(m.name for m in COMPARED_METRICS)
# B/A up to 1.04 is "not slower": a 10 % slower ITL is about 9 % slower e2e, so the
# margin leaves that slowdown room to be called at a few percent of between-run noise
DEFAULT_MARGIN = 0.04
DEFAULT_ALPHA = 0.05  # family-wise error rate of regress claims (and of pass claims)
_SLOWER = re.compile(r"slower(?::(?P<metric>[a-z0-9_]+))?(?::(?P<threshold>[0-9.]+)%?)?")
_FAILURES = re.compile(r"failures(?::(?P<threshold>[0-9.]+)%?)?")
Status = Literal["fail", "pass", "not judged", "inconclusive", "allowed"]
Kind = Literal["slower", "failures", "complete"]
VALID_SHARE = "valid_share"  # the quantity a failures rule checks
CellKey = tuple[str, int, str | None]  # (mode, capacity, load)
_FATAL = (Reason.PROMPT_DIFFERS, Reason.PROMPT_TOKENS_DIFFER)


@dataclass(frozen=True)
class FailOn:
    """One rule. ``slower``: fail when B's ``metric`` mean is above A's by more than
    ``threshold`` (the margin, a fraction: 0.05 = 5 %). ``failures``: fail when B's
    valid share is below A's by more than ``threshold`` (0.05: 5 points)."""

    kind: Kind = "slower"
    metric: str = "e2e_ms"
    threshold: float = DEFAULT_MARGIN

    @classmethod
    def parse(cls, text: str) -> FailOn:
        """``slower``, ``slower:ttft_ms``, ``slower:ttft_ms:5%``, ``failures`` or
        ``failures:5%``; ConfigError (one line) for anything else."""
        failures = _FAILURES.fullmatch(text.strip())
        if failures is not None:
            return cls("failures", VALID_SHARE, float(failures["threshold"] or 0.0) / 100.0)
        match = _SLOWER.fullmatch(text.strip())
        if match is None:
            raise ConfigError(f"--fail-on {text!r}: expected slower[:METRIC[:MARGIN%]] or "
                              "failures[:THRESHOLD%], e.g. slower, slower:ttft_ms, "
                              "slower:e2e_ms:5% or failures:2%")
        metric = match["metric"] or "e2e_ms"
        if metric not in METRICS:
            raise ConfigError(f"--fail-on {text!r}: metric {metric!r} is not one of "
                              f"{', '.join(METRICS)}")
        given = match["threshold"]
        return cls("slower", metric,
                   DEFAULT_MARGIN if given is None else float(given) / 100.0)

    def describe(self) -> str:
        if self.kind == "failures":
            return (f"B's valid share below A's by more than {self.threshold * 100:.1f} "
                    "percentage points")
        return f"B's mean {self.metric} above A's by more than {self.threshold:.1%}"


def with_failures(rules: Sequence[FailOn]) -> tuple[FailOn, ...]:
    """``rules`` with the default ``failures`` rule added when none is given (a gate
    without rules stays without rules)."""
    if not rules or any(r.kind == "failures" for r in rules):
        return tuple(rules)
    return (*rules, FailOn("failures", VALID_SHARE, 0.0))


@dataclass(frozen=True)
class NoiseFloor:
    """The between-run noise of one cell and metric: ``between`` is the sd of log(run
    mean) between identical runs, from ``runs`` runs; ``source`` says where from."""

    between: float
    runs: int
    source: str


@dataclass(frozen=True)
class CellRuns:
    """One cell of A's plan with the valid rows of each run of each side that measured
    it (``b`` empty: B lacks it) and the noise floor of each metric, when known."""

    mode: str
    capacity: int
    load: str | None
    a: tuple[ValidRows, ...]
    b: tuple[ValidRows, ...]
    floors: Mapping[str, NoiseFloor] = field(default_factory=dict)
    b_lacking: int = 0  # runs of B that did not measure the cell at all

    @property
    def key(self) -> CellKey:
        return (self.mode, self.capacity, self.load)


@dataclass(frozen=True)
class GateCheck:
    """One rule (or the plan's completeness) in one cell. ``slower``: B/A of the means,
    its interval (each end at the family's level), Holm-adjusted p-values of
    regress and pass, and the smallest slowdown it could detect; ``failures``: each
    side's valid share; ``complete``: B's rows against A's plan."""

    mode: str
    capacity: int
    load: str | None
    kind: Kind
    metric: str
    threshold: float
    status: Status
    count_a: RowCount
    count_b: RowCount
    b_over_a: float | None = None
    low: float | None = None  # of B/A
    high: float | None = None
    p_regress: float | None = None  # Holm-adjusted
    p_pass: float | None = None
    detectable: float | None = None  # smallest slowdown (fraction) at 80 % power
    runs_a: int = 1
    runs_b: int = 1
    between: str = ""  # where the between-run part came from
    why: str = ""  # not judged, or what is missing

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["count_a"], data["count_b"] = self.count_a.to_dict(), self.count_b.to_dict()
        data["share_a"], data["share_b"] = self.count_a.share, self.count_b.share
        data["verdict"] = {"fail": "regress" if self.kind == "slower" else "fail"}.get(
            self.status, self.status)
        return data

    def describe(self) -> str:
        at = f"{self.mode} @ {self.capacity} {self.load or 'sequential'} {self.metric}"
        sides = f"A {self.count_a.describe()}; B {self.count_b.describe()}"
        if self.kind == "complete":
            return f"{at}: {self.why}: {self.status} [{sides}]"
        if self.status == "not judged":
            return f"{at}: not judged ({self.why}) [{sides}]"
        if self.kind == "failures":
            a, b = self.count_a.share or 0.0, self.count_b.share or 0.0
            return (f"{at}: A {a:.1%}, B {b:.1%}, limit A − {self.threshold * 100:.1f} "
                    f"points: {self.status} [{sides}]")
        verdict = "regress" if self.status == "fail" else self.status
        runs = f"{self.runs_a} vs {self.runs_b} run{'s' if self.runs_b > 1 else ''}"
        return (f"{at}: B/A = {self.b_over_a:.3f}, interval {self.low:.3f}–{self.high:.3f}, "
                f"limit {1 + self.threshold:.3f}: {verdict}; could detect ≥ "
                f"{(self.detectable or 0.0):.1%} slower; {runs}, between runs: "
                f"{self.between} [{sides}]")


@dataclass(frozen=True)
class GateResult:
    """Every check; ``alpha``: the family-wise error rate; the flags accept checks not
    judged, missing cells or inconclusive verdicts (each is still listed)."""

    rules: tuple[FailOn, ...]
    checks: tuple[GateCheck, ...]
    alpha: float = DEFAULT_ALPHA
    accept_unjudged: bool = False
    allow_missing: bool = False
    inconclusive_ok: bool = False
    failed_checks: tuple[GateCheck, ...] = field(init=False)
    unjudged: tuple[GateCheck, ...] = field(init=False)
    inconclusive: tuple[GateCheck, ...] = field(init=False)

    def __post_init__(self) -> None:
        def having(status: str) -> tuple[GateCheck, ...]:
            return tuple(c for c in self.checks if c.status == status)
        object.__setattr__(self, "failed_checks", having("fail"))
        object.__setattr__(self, "unjudged", having("not judged"))
        object.__setattr__(self, "inconclusive", having("inconclusive"))

    @property
    def failed(self) -> bool:
        return bool(self.failed_checks)

    @property
    def family(self) -> int:
        """The slower checks judged together (Holm's family)."""
        return sum(1 for c in self.checks if c.kind == "slower" and c.p_regress is not None)

    @property
    def exit_code(self) -> int:
        """1: a check failed (regress, failures, a missing cell); 2: a check not judged;
        3: inconclusive; 0: every check passed (or was accepted)."""
        if self.failed:
            return 1
        if self.unjudged and not self.accept_unjudged:
            return 2
        return 3 if self.inconclusive and not self.inconclusive_ok else 0

    def error_rates(self) -> str:
        """One line: the family-wise error rates stated."""
        return (f"family-wise error rate ≤ {self.alpha:.0%} for a false regress and ≤ "
                f"{self.alpha:.0%} for a false pass, over {self.family} slower check"
                f"{'s' if self.family != 1 else ''} (Holm); stated only where the between-"
                "run part is known (several runs per side, or a noise floor)")

    def summary(self) -> str:
        """One line: the verdict and its counts."""
        verdict = {0: "passed", 1: "FAILED", 2: "NOT JUDGED", 3: "INCONCLUSIVE"}[self.exit_code]
        line = (f"gate: {verdict} ({len(self.failed_checks)} of {len(self.checks)} checks "
                "failed")
        if self.inconclusive:
            line += (f", {len(self.inconclusive)} inconclusive"
                     + (" (accepted by --inconclusive-ok)" if self.inconclusive_ok else ""))
        if self.unjudged:
            line += (f", {len(self.unjudged)} not judged"
                     + (", accepted by --accept-unjudged" if self.accept_unjudged else
                        "; --accept-unjudged accepts them"))
        return line + f"; exit {self.exit_code})"

    def to_dict(self) -> dict[str, Any]:
        return {"failed": self.failed, "exit_code": self.exit_code, "alpha": self.alpha,
                "family": self.family, "error_rates": self.error_rates(),
                "accept_unjudged": self.accept_unjudged, "allow_missing": self.allow_missing,
                "inconclusive_ok": self.inconclusive_ok,
                "rules": [asdict(r) for r in self.rules],
                "checks": [c.to_dict() for c in self.checks],
                "missing": [c.describe() for c in self.checks if c.kind == "complete"],
                "unjudged": [{"cell": c.describe(), "why": c.why} for c in self.unjudged]}


def _values(runs: Sequence[ValidRows], metric: str
            ) -> tuple[list[list[float]], list[list[tuple[str, int]]]]:
    """Each run's values of ``metric`` over its valid rows, and their keys."""
    of = next(m for m in COMPARED_METRICS if m.name == metric).of
    values, keys = [], []
    for run in runs:
        pairs = [((r.query_id, r.repetition), v) for r in run.rows if (v := of(r)) is not None]
        keys.append([k for k, _ in pairs])
        values.append([v for _, v in pairs])
    return values, keys


def completeness(cell: CellRuns, allow_missing: bool) -> GateCheck | None:
    """A check naming what B lacks of A's plan in ``cell`` (None: B has it all): "k of
    n planned" per B run that did not measure or finish it."""
    count_a = RowCount.total(v.count for v in cell.a)
    planned = max((c.count.of for c in cell.a), default=0)
    short = []
    for i, run in enumerate(cell.b or ()):
        c = run.count
        n = c.planned if c.planned is not None else planned
        if not c.finished or c.measured < n:
            short.append(f"run {i + 1} of B: {c.measured} of {n} planned, not finished")
    if not cell.b or cell.b_lacking:
        runs = len(cell.b) + cell.b_lacking
        who = "B" if runs <= 1 else f"{cell.b_lacking} of {runs} runs of B"
        short.append(f"not measured in {who}: 0 of {planned} planned")
    if not short:
        return None
    count_b = RowCount.total(v.count for v in cell.b) if cell.b else RowCount(0, 0)
    return GateCheck(cell.mode, cell.capacity, cell.load, "complete", "plan", 0.0,
                     "allowed" if allow_missing else "fail", count_a, count_b,
                     runs_a=len(cell.a), runs_b=len(cell.b), why="; ".join(short))


def _estimate(cell: CellRuns, rule: FailOn, resamples: int,
              seed: int) -> tuple[RatioEstimate | None, str]:
    floor = cell.floors.get(rule.metric)
    va, ka = _values(cell.a, rule.metric)
    vb, kb = _values(cell.b, rule.metric)
    found = hierarchical_ratio(va, vb, between=floor.between if floor else None,
                               keys_a=ka, keys_b=kb, resamples=resamples, seed=seed)
    if found is None:
        return None, ""
    if found.between == "runs":
        return found, (f"resampled ({found.runs_a} and {found.runs_b} runs; Student's t, "
                       f"{found.df:.1f} df)")
    if floor is not None:
        return found, f"noise floor {floor.between:.2%} ({floor.runs} runs, {floor.source})"
    return found, "no noise floor known (rows only; `kvlab floor` measures one)"


def gate(cells: Sequence[CellRuns], rules: Sequence[FailOn], *,
         alpha: float = DEFAULT_ALPHA, accept_unjudged: bool = False,
         allow_missing: bool = False, inconclusive_ok: bool = False,
         resamples: int = 2000, seed: int = 0) -> GateResult:
    """Every rule (with the default ``failures`` rule, :func:`with_failures`) on every
    cell of A's plan, B's completeness of each, and Holm over the slower checks."""
    every = with_failures(rules)
    checks: list[GateCheck] = []
    pending: list[tuple[int, RatioEstimate, FailOn]] = []
    for cell in cells:
        missing = completeness(cell, allow_missing)
        if missing is not None:
            checks.append(missing)
        if not cell.b:
            continue
        count_a = RowCount.total(v.count for v in cell.a)
        count_b = RowCount.total(v.count for v in cell.b)
        fatal = [v for v in check_pairs("A", cell.a[0].sent, "B", cell.b[0].sent)
                 if v.reason in _FATAL]
        for n, rule in enumerate(every):
            base = GateCheck(cell.mode, cell.capacity, cell.load, rule.kind, rule.metric,
                             rule.threshold, "not judged", count_a, count_b,
                             runs_a=len(cell.a), runs_b=len(cell.b))
            if fatal:
                checks.append(_with(base, why=f"refused: prompts differ ({fatal[0]})"))
            elif rule.kind == "failures":
                a, b = count_a.share, count_b.share
                if a is None or b is None:
                    checks.append(_with(base, why="no measured row on one side"))
                else:
                    checks.append(_with(base, status="fail" if b < a - rule.threshold - 1e-12
                                        else "pass"))
            elif not any(v.rows for v in cell.a) or not any(v.rows for v in cell.b):
                side = "A" if not any(v.rows for v in cell.a) else "B"
                checks.append(_with(base, why=f"refused: no valid row in {side}"))
            else:
                found, between = _estimate(cell, rule, resamples, seed + n)
                if found is None:
                    checks.append(_with(base, why="the runs have no such values"))
                    continue
                pending.append((len(checks), found, rule))
                checks.append(_with(base, b_over_a=found.ratio, between=between))
    return GateResult(every, _judged(checks, pending, alpha), alpha, accept_unjudged,
                      allow_missing, inconclusive_ok)


def _with(check: GateCheck, **changes: Any) -> GateCheck:
    return replace(check, **changes)


def _judged(checks: list[GateCheck], pending: list[tuple[int, RatioEstimate, FailOn]],
            alpha: float) -> tuple[GateCheck, ...]:
    """The slower checks judged as one family (Holm, each direction at ``alpha``)."""
    n = len(pending)
    regress = holm([e.p_slower_than(1 + r.threshold) for _, e, r in pending])
    passes = holm([e.p_faster_than(1 + r.threshold) for _, e, r in pending])
    level = 1.0 - 2.0 * alpha / max(1, n)  # each end at alpha / n, one-sided
    for (i, found, rule), p_r, p_p in zip(pending, regress, passes, strict=True):
        status: Status = "fail" if p_r <= alpha else "pass" if p_p <= alpha else "inconclusive"
        low, high = found.interval(level)
        checks[i] = _with(checks[i], status=status, low=low, high=high, p_regress=p_r,
                          p_pass=p_p, detectable=detectable(found.log_se, rule.threshold,
                                                            alpha, n, df=found.df))
    return tuple(checks)
