"""``crosscheck.json``: one cross-check as a typed file, and its Markdown table.

:func:`save` writes it, :func:`load` validates it back (the results page of
``make run-full`` reads it), :func:`markdown` renders it: per client, its TTFT and ITL
errors against the schedule (median and p99 with their 95 % intervals), the requests
counted, and for each peer the files read back against what the peer printed.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ValidationError

from kvlab.errors import ConfigError
from kvlab.markdown import row

FILE = "crosscheck.json"


class Figure(BaseModel):
    """A statistic of an error (ms) with its 95 % interval (None: too few values)."""

    value: float | None
    low: float | None = None
    high: float | None = None

    def text(self) -> str:
        if self.value is None:
            return "—"
        band = f" [{self.low:+.2f}, {self.high:+.2f}]" if self.low is not None \
            and self.high is not None else ""
        return f"{self.value:+.2f}{band}"


class ClientLine(BaseModel):
    """One client's figures over every round."""

    client: str
    program: str
    version: str
    expected: int  # requests it was asked to send
    recorded: int  # requests its own files hold
    answered: int  # requests the server answered while it ran (its checks included)
    counted: int  # requests kvlab read back from its files, ok and of the forced length
    problems: list[str]
    ttft_median: Figure
    ttft_p99: Figure
    itl_median: Figure
    itl_p99: Figure
    within_tolerance: bool
    seconds: float  # wall time of its runs, start-up included
    # how late the server itself wrote the first tokens of this client's requests (ms):
    # the part of a TTFT error that is not the client's
    server_late_median_ms: float | None = None
    server_late_p99_ms: float | None = None


class RoundTripLine(BaseModel):
    """A peer's file read back against the peer's own summary."""

    client: str
    file: str
    printed_requests: int
    read_requests: int
    printed_median_ttft_ms: float
    read_median_ttft_ms: float | None
    relative_error: float | None
    holds: bool


class CrossCheck(BaseModel):
    """A whole cross-check: the schedule, each client's errors, the round trips, the
    clients that failed (one line each), the machine's state and the command."""

    schedule: dict[str, float]
    schedule_text: str
    tolerance_ms: float
    order: list[list[str]]  # the clients of each round, in the order they ran
    clients: list[ClientLine]
    round_trips: list[RoundTripLine]
    failures: list[str]
    server_lateness_p99_ms: float | None  # the server's own writes against its schedule
    load_before: list[float]  # 1, 5, 15 min load averages
    load_after: list[float]
    cpu_flags: list[str]
    command: str
    started_at: str

    @property
    def ok(self) -> bool:
        """No failure; every client within tolerance, the server answering all it was
        asked to send and kvlab counting every request its files hold; every round
        trip. A peer that leaves a request out of its own file (GuideLLM, at times) is
        named among its problems, not failed."""
        return not self.failures and all(
            c.within_tolerance and c.counted == c.recorded and c.answered >= c.expected
            for c in self.clients) \
            and all(t.holds for t in self.round_trips)


def save(result: CrossCheck, folder: Path) -> Path:
    path = folder / FILE
    path.write_text(result.model_dump_json(indent=1) + "\n", encoding="utf-8")
    (folder / "crosscheck.md").write_text(markdown(result), encoding="utf-8")
    return path


def load(path: Path) -> CrossCheck:
    """A crosscheck.json read back; ConfigError in one line when it is not one."""
    try:
        return CrossCheck.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError) as exc:
        first = str(exc).splitlines()[0]
        raise ConfigError(f"{path}: not a cross-check kvlab can read ({first})") from None


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _load_text(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def markdown(result: CrossCheck) -> str:
    """The table of errors, the round trips and the conditions, as Markdown."""
    lines = [f"Schedule: {result.schedule_text}; tolerance ±{result.tolerance_ms:g} ms on "
             "each median error. Errors are measured − scheduled, in ms, with 95 % "
             "bootstrap intervals.", "",
             "| client | TTFT error median | TTFT error p99 | ITL error median | "
             "ITL error p99 | requests counted | server's own first-token lateness "
             "median / p99 |", "|---|---|---|---|---|---|---|"]
    for c in result.clients:
        lines.append(row([f"{c.program} {c.version}", c.ttft_median.text(), c.ttft_p99.text(),
                          c.itl_median.text(), c.itl_p99.text(),
                          f"{c.counted} of {c.expected} ({c.answered} answered)",
                          f"{_ms(c.server_late_median_ms)} / {_ms(c.server_late_p99_ms)}"]))
    lines.append("")
    for failure in result.failures:
        lines.append(f"- failed: {failure}")
    for c in result.clients:
        for problem in c.problems[:3]:
            lines.append(f"- {c.client}: {problem}")
    if result.round_trips:
        lines += ["", "Each peer's file read back by kvlab, against what the peer printed "
                  "(median TTFT under the peer's own definitions):", "",
                  "| peer | file | requests printed / read | median TTFT printed / read | "
                  "difference |", "|---|---|---|---|---|"]
        for t in result.round_trips:
            read = "—" if t.read_median_ttft_ms is None else f"{t.read_median_ttft_ms:.3f}"
            diff = "—" if t.relative_error is None else f"{t.relative_error:.4%}"
            lines.append(row([t.client, Path(t.file).name,
                              f"{t.printed_requests} / {t.read_requests}",
                              f"{t.printed_median_ttft_ms:.3f} / {read}", diff]))
    lateness = "—" if result.server_lateness_p99_ms is None \
        else f"{result.server_lateness_p99_ms:.3f} ms"
    lines += ["", f"Server's own lateness against its schedule (p99 of its writes): "
              f"{lateness}. Load average before {_load_text(result.load_before)}, after "
              f"{_load_text(result.load_after)}; CPU flags: "
              f"{' '.join(result.cpu_flags) or 'none of note'}. Order of the rounds: "
              + "; ".join(", ".join(r) for r in result.order) + ".", "",
              f"Command: `{result.command}` ({result.started_at})."]
    return "\n".join(lines) + "\n"
