"""A client's error against a known schedule, and a peer file read back against its tool.

The synthetic server writes the first token ``ttft_ms`` after it has read a request and
each next one ``itl_ms`` later (:mod:`kvlab.serve.synthetic`), so what a client should
measure is known before it runs. Its error is what it measured minus the schedule,
per request: TTFT (first output token − sent) and ITL ((last output − first output) /
(output tokens − 1), the per-request definition GuideLLM and AIPerf use, and the only
one GuideLLM's file allows, since it keeps no time per token). Each client's rows are
read from its own file (:mod:`kvlab.peers` for the peers), so the clock is the
client's, not kvlab's reading of it.

The schedule's tolerance is half a token gap: a client whose typical (median) error
were larger would put a token's time nearer its neighbour's slot than its own. What
must hold for every client is that its median errors stay within it and that every
request it sent is counted, with the forced length; who is most exact is a measured
figure, never asserted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from kvlab.analysis import metrics
from kvlab.analysis.definition_cells import under
from kvlab.analysis.stats import Interval, bootstrap_ci, percentile
from kvlab.rundir import Outcome, Record

# Which of kvlab's definition sets (kvlab.analysis.definitions) each client follows.
DEFINITIONS = {"kvlab": "kvlab", "guidellm": "guidellm", "aiperf": "aiperf",
               "vllm-bench": "vllm"}


@dataclass(frozen=True)
class Schedule:
    """The synthetic server's schedule and the load each client sends (times in ms):
    ``requests`` one at a time per round, ``rounds`` rounds, ``tokens`` forced."""

    ttft_ms: float = 20.0
    itl_ms: float = 20.0
    tokens: int = 16
    requests: int = 12
    rounds: int = 2

    @property
    def tolerance_ms(self) -> float:
        """Half a token gap (see the module docstring)."""
        return self.itl_ms / 2

    def describe(self) -> str:
        return (f"TTFT {self.ttft_ms:g} ms, ITL {self.itl_ms:g} ms, {self.tokens} forced "
                f"tokens, {self.requests} requests one at a time in each of {self.rounds} "
                f"rounds")


@dataclass(frozen=True)
class Spread:
    """One error's distribution over a client's requests (ms): median and p99, each
    with its bootstrap 95 % interval (None below 5 values)."""

    n: int
    median_ms: float | None
    p99_ms: float | None
    median_ci: Interval | None
    p99_ci: Interval | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(len(values), percentile(values, 50), percentile(values, 99),
                   bootstrap_ci(values, "median"), bootstrap_ci(values, "p99"))


@dataclass(frozen=True)
class ClientErrors:
    """A client's TTFT and ITL errors against the schedule, over every round, and
    whether every request was counted (``problems`` names those that were not)."""

    client: str
    expected: int  # requests the rounds asked it to send
    recorded: int  # requests its own files hold
    counted: int  # of those, read back by kvlab ok and with the forced length
    problems: tuple[str, ...]
    ttft: Spread
    itl: Spread

    def within(self, tolerance_ms: float) -> bool:
        """Both median errors within ± the tolerance."""
        return all(s.median_ms is not None and abs(s.median_ms) <= tolerance_ms
                   for s in (self.ttft, self.itl))

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def client_errors(client: str, rows: Sequence[Record], schedule: Schedule) -> ClientErrors:
    """The errors of ``rows`` (a client's measured requests, warm-ups left out)."""
    expected = schedule.requests * schedule.rounds
    problems: list[str] = []
    ttft: list[float] = []
    itl: list[float] = []
    for r in rows:
        where = f"{r.imported_from or r.run_id}: {r.query_id}"
        if r.outcome is not Outcome.OK:
            problems.append(f"{where} failed ({r.error or r.outcome.value})")
            continue
        if r.output_tokens != schedule.tokens:
            problems.append(f"{where} has {r.output_tokens} output tokens, not "
                            f"{schedule.tokens}")
            continue
        first, gap = metrics.ttft_ms(r), metrics.itl_effective_ms(r)
        if first is None or gap is None:
            problems.append(f"{where} has no first or last token time")
            continue
        ttft.append(first - schedule.ttft_ms)
        itl.append(gap - schedule.itl_ms)
    if len(rows) != expected:
        problems.insert(0, f"its files hold {len(rows)} requests of the {expected} it "
                           "was asked to send")
    return ClientErrors(client, expected, len(rows), len(ttft), tuple(problems),
                        Spread.of(ttft), Spread.of(itl))


@dataclass(frozen=True)
class RoundTrip:
    """A peer's file read back by kvlab against what the peer itself printed: request
    count and median TTFT (ms) under the peer's own definitions."""

    file: str
    printed_requests: int
    read_requests: int
    printed_median_ttft_ms: float
    read_median_ttft_ms: float | None

    @property
    def relative_error(self) -> float | None:
        """|read − printed| / printed of the median TTFT."""
        if self.read_median_ttft_ms is None or self.printed_median_ttft_ms == 0:
            return None
        return abs(self.read_median_ttft_ms - self.printed_median_ttft_ms) \
            / self.printed_median_ttft_ms

    def holds(self, within: float = 0.001) -> bool:
        """Same count, and the same median TTFT to ``within`` (0.1 %)."""
        error = self.relative_error
        return self.read_requests == self.printed_requests and error is not None \
            and error <= within

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "relative_error": self.relative_error}


def round_trip(client: str, file: str, rows: Sequence[Record], printed_requests: int,
               printed_median_ttft_ms: float) -> RoundTrip:
    """``rows`` (the peer's file read back, warm-ups left out) against its summary."""
    ok = [r for r in rows if r.outcome is Outcome.OK]
    median = under(ok, DEFINITIONS[client])[0]["ttft_ms"].median
    return RoundTrip(file, printed_requests, len(ok), printed_median_ttft_ms, median)
