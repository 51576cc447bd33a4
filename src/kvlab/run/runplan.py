"""A run plan: the work of a run as typed steps, made once from the experiment.

:func:`kvlab.run.planner.plan_run` turns an experiment file (and the command
line) into a :class:`RunPlan`, with every check a run needs before it starts; the
executor (:mod:`kvlab.run.executor`) walks its steps and never reads the
experiment again. A plan is data: ``kvlab run --dry-run`` prints it (:meth:`RunPlan.lines`,
:meth:`RunPlan.to_json`), and no secret is in it (an external mode's key is read from
the environment when its endpoint is reached).

The steps, in run order (blocked, ABBA shares or interleaved, see bench.plan.order):

- :class:`Launch`: a mode's server up at a capacity (started, or ``--no-launch``'s
  server checked, or an external endpoint checked), the capacity's prompts prepared on
  first use;
- :class:`WarmUp`: warm-up requests, never aggregated;
- :class:`MeasureRows`: sequential rows, one after another (of one mode, or of several
  modes alternating request by request);
- :class:`MeasurePoint`: one load point, whole (its strategy, bench.plan.loads);
- :class:`Search`: a capacity search, rate points chosen one after another;
- :class:`Stop`: the server stopped and entered in the run's state.

Rows and points already done (a resume) are not in the plan; a server with nothing to
do is not launched.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.client.urls import redact_url
from kvlab.bench.drivers.driver import DriverSettings
from kvlab.bench.plan.dataset import Dataset
from kvlab.bench.plan.load_settings import SearchSettings, SloSettings
from kvlab.bench.plan.loads.base import LoadStrategy, LoadTable
from kvlab.bench.plan.order import Block, OrderChoice, sequence_of
from kvlab.bench.plan.workload import PreparedPrompt, Query
from kvlab.rundir import ApiKind
from kvlab.servers.base import ServerSettings
from kvlab.servers.process import ServerProcess


def request_salt(run_id: str, position: int) -> str:
    """The ``cache_salt`` of the request at ``position`` of run ``run_id``: unique per
    request, stable on resume, 32 hex digits (vLLM takes up to 128 characters, none of
    ``@ / \\``)."""
    return hashlib.sha256(f"{run_id}:{position}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ModePlan:
    """How one mode is reached and asked: its server kind's settings (which build the
    server, or say where an external endpoint is), the API, and the body fields every
    request carries: the protocol's, then (with ``cache_salt``) the request's own salt,
    then the mode's ``body``, which wins."""

    name: str
    settings: ServerSettings
    api: ApiKind
    stream: bool
    protocol: dict[str, Any]
    body: dict[str, Any]
    cache_salt: bool
    capacities: tuple[int, ...]
    # an embeddings mode: each request a batch of ``batch`` inputs, nothing generated
    # (None: a generation, one prompt per request)
    batch: int | None = None
    server_history: bool = False  # sessions: the server keeps each conversation

    @property
    def server(self) -> str:
        """The server kind's name."""
        return str(type(self.settings).model_fields["kind"].default)

    def request_params(self, salt: str | None = None) -> dict[str, Any]:
        """The body fields of one request; ``salt``: its ``cache_salt``, sent when the
        protocol asks for one."""
        salted = {"cache_salt": salt} if self.cache_salt and salt is not None else {}
        return {**self.protocol, **salted, **self.body}

    def request(self, prompt: PreparedPrompt, capacity: int, repetition: int, position: int,
                run_id: str, output_tokens: int, warmup: bool = False,
                following: Sequence[PreparedPrompt] = (), dimension: int | None = None
                ) -> RequestSpec:
        """The request of one row of run ``run_id`` (its identity included); a row that
        asks for its own output length gets it, else ``output_tokens``. An embeddings
        mode's row sends its prompt and the ``batch - 1`` prompts ``following`` it,
        whose vectors must be ``dimension`` long (None: unknown)."""
        inputs = None if self.batch is None else \
            (prompt.prompt, *(p.prompt for p in following[:self.batch - 1]))
        return RequestSpec(
            prompt=prompt.prompt,
            max_tokens=0 if inputs is not None else prompt.asked_output(output_tokens),
            stream=self.stream, params=self.request_params(request_salt(run_id, position)),
            run_id=run_id, mode=self.name, capacity=capacity, query_id=prompt.query_id,
            repetition=repetition, position=position, warmup=warmup, inputs=inputs,
            server_history=self.server_history,
            dimension_expected=None if inputs is None else self.expected_width(dimension))

    def expected_width(self, declared: int | None) -> int | None:
        """The vector length an embeddings answer must have: the ``dimensions`` the
        mode's body asks, else the width the server ``declared`` (None: unknown)."""
        asked = self.body.get("dimensions")
        return asked if isinstance(asked, int) and not isinstance(asked, bool) else declared


@dataclass(frozen=True)
class WorkloadPlan:
    """What is sent: the dataset (its rows read once) and how each row is asked."""

    dataset: Dataset
    queries: tuple[Query, ...]
    repetitions: int
    warmup: int
    output_tokens: int
    prompt_fraction: float
    tokenizer: str | None  # counts prompt tokens where a server cannot (absolute path)
    cache_prompt: bool  # the protocol lets servers reuse prefixes (warm-ups share none)
    capacities: tuple[int, ...]  # every capacity of the experiment, ascending

    @property
    def rows(self) -> int:
        """Rows per (mode, capacity): queries x repetitions."""
        return len(self.queries) * self.repetitions


@dataclass(frozen=True)
class Launch:
    """``mode``'s server up at ``capacity``; ``url``: the server the user started
    (``--no-launch``), None: kvlab launches it (or reaches the external endpoint)."""

    mode: str
    capacity: int
    url: str | None = None


@dataclass(frozen=True)
class WarmUp:
    """``requests`` warm-up requests to ``mode`` at ``capacity`` (flagged, not measured)."""

    mode: str
    capacity: int
    requests: int


@dataclass(frozen=True)
class Row:
    """One sequential row: a query of the dataset, at one repetition, to one mode."""

    mode: str
    repetition: int
    query_id: str


@dataclass(frozen=True)
class MeasureRows:
    """Sequential rows at ``capacity``, one after another, in this order; ``name`` is
    what progress shows. ``interleaved``: the rows of several modes alternate request
    by request, every mode's server up at once (``name``: ``a+b``); else they are one
    mode's (``name``: the mode)."""

    capacity: int
    rows: tuple[Row, ...]
    name: str
    interleaved: bool = False


@dataclass(frozen=True)
class MeasurePoint:
    """One load point of ``mode`` at ``capacity``, sent whole."""

    mode: str
    capacity: int
    point: LoadStrategy


@dataclass(frozen=True)
class Search:
    """The highest rate of ``load``'s points at which ``search``'s objectives hold, for
    ``mode`` at ``capacity``; each point sends ``requests`` unless ``load`` says."""

    mode: str
    capacity: int
    search: SearchSettings
    slo: SloSettings
    load: LoadTable
    requests: int


@dataclass(frozen=True)
class Stop:
    """``mode``'s server at ``capacity`` stopped (and entered in the run's state)."""

    mode: str
    capacity: int


Step = Launch | WarmUp | MeasureRows | MeasurePoint | Search | Stop


@dataclass(frozen=True)
class RunPlan:
    """The work of one run (or of a resume): modes, workload, order and steps.

    ``overrides``, ``repeat_aa`` and ``no_launch`` are what the command line changed
    (kept in the manifest); ``driver`` sends the requests (bench.drivers)."""

    name: str
    modes: tuple[ModePlan, ...]
    workload: WorkloadPlan
    order: OrderChoice
    blocks: tuple[Block, ...]
    steps: tuple[Step, ...]
    driver: DriverSettings
    slip_threshold_ms: float
    in_flight_cap: int | None  # a cap on requests in flight load workers must split
    ready_timeout_s: float
    request_timeout_s: float
    overrides: dict[str, Any] = field(default_factory=dict)
    repeat_aa: str | None = None
    no_launch: dict[str, str] | None = None  # MODE[@CAPACITY] -> URL, no credentials

    def mode(self, name: str) -> ModePlan:
        """The mode called ``name`` (KeyError: not in the plan)."""
        return next(m for m in self.modes if m.name == name)

    @property
    def shares_points(self) -> bool:
        """The plan has load points or a search (not only sequential rows)."""
        return any(isinstance(s, MeasurePoint | Search) for s in self.steps)

    def rows_planned(self) -> list[tuple[str, int, str | None, int | None]]:
        """Rows each (mode, capacity, load label) cell is to send: sequential rows
        (label None) and load points (None rows: a point sent for a duration); a
        capacity search's points are chosen as it goes and are left out."""
        out: dict[tuple[str, int, str | None], int | None] = {}
        for step in self.steps:
            if isinstance(step, MeasureRows):
                for row in step.rows:
                    key = (row.mode, step.capacity, None)
                    out[key] = (out.get(key) or 0) + 1
            elif isinstance(step, MeasurePoint):
                label = step.point.label
                if label is not None:
                    by_duration = getattr(step.point, "requests", 0) is None
                    out[(step.mode, step.capacity, label)] = \
                        None if by_duration else step.point.planned_requests()
        return [(m, c, load, n) for (m, c, load), n in out.items()]

    def order_facts(self) -> dict[str, Any]:
        """The order asked and used, and the blocks (the manifest's ``run_order``)."""
        return {**self.order.to_dict(), "sequence": sequence_of(self.blocks)}

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON data (``kvlab run --dry-run --json``)."""
        w = self.workload
        return {
            "name": self.name, "order": self.order_facts(),
            "driver": self.driver.model_dump(mode="json"),
            "workload": {"queries": len(w.queries), "repetitions": w.repetitions,
                         "warmup": w.warmup, "output_tokens": w.output_tokens,
                         "capacities": list(w.capacities)},
            "modes": [{"name": m.name, "server": m.server, "api": str(m.api),
                       "stream": m.stream, "capacities": list(m.capacities)}
                      for m in self.modes],
            "steps": [self._step_json(s) for s in self.steps],
            "overrides": self.overrides, "repeat_aa": self.repeat_aa,
            "no_launch": self.no_launch,
        }

    def _step_json(self, step: Step) -> dict[str, Any]:
        match step:
            case Launch():
                return {"step": "launch", "mode": step.mode, "capacity": step.capacity,
                        **self.target(step)}
            case WarmUp():
                return {"step": "warmup", "mode": step.mode, "capacity": step.capacity,
                        "requests": step.requests}
            case MeasureRows():
                return {"step": "rows", "capacity": step.capacity, "name": step.name,
                        "rows": [[r.mode, r.repetition, r.query_id] for r in step.rows]}
            case MeasurePoint():
                return {"step": "point", "mode": step.mode, "capacity": step.capacity,
                        "load": step.point.label, "kind": step.point.kind.name,
                        "requests": step.point.planned_requests(),
                        "describe": step.point.describe()}
            case Search():
                return {"step": "search", "mode": step.mode, "capacity": step.capacity,
                        "search": step.search.model_dump(mode="json"),
                        "load": step.load.facts()}
            case Stop():
                return {"step": "stop", "mode": step.mode, "capacity": step.capacity}

    def target(self, launch: Launch) -> dict[str, Any]:
        """What a launch reaches: its server kind and API, and the exact argv kvlab
        would launch, the user's server (``url``) or the external endpoint."""
        mode = self.mode(launch.mode)
        out: dict[str, Any] = {"server": mode.server, "api": str(mode.api)}
        if launch.url is not None:
            out["url"] = redact_url(launch.url)
        elif (address := mode.settings.address()) is not None:
            out["endpoint"] = address.describe()
        else:
            server = mode.settings.build(launch.capacity)
            if isinstance(server, ServerProcess):
                out["argv"] = server.argv()
        return out

    def lines(self) -> list[str]:
        """The plan for a reader: one numbered line per step (``--dry-run``)."""
        w = self.workload
        order = self.order.used + (f" (asked {self.order.requested}: {self.order.reason})"
                                   if self.order.reason else "")
        out = [f"plan of {self.name}: {len(self.modes)} mode(s), order {order}; "
               f"{len(w.queries)} queries x {w.repetitions}, {w.output_tokens} output "
               f"tokens; load driver {self.driver.describe()}"]
        if self.overrides:
            from kvlab.report.protocol import overrides_text

            out.append(f"  overrides of the file (kvlab run): "
                       f"{', '.join(overrides_text(self.overrides))}")
        for number, step in enumerate(self.steps, start=1):
            out += [f"{number:>3}. {line}" if i == 0 else f"     {line}"
                    for i, line in enumerate(self._step_lines(step))]
        return out

    def _step_lines(self, step: Step) -> list[str]:
        match step:
            case Launch():
                facts = self.target(step)
                what = f"{step.mode} @ {step.capacity}: {facts['server']}"
                if "argv" in facts:
                    return [f"launch {what} server, {facts['api']}", shlex.join(facts["argv"])]
                if "url" in facts:
                    return [f"attach {what} server, {facts['api']}",
                            f"the server at {facts['url']}"]
                return [f"reach {what} endpoint, {facts['api']}", f"at {facts.get('endpoint')}"]
            case WarmUp():
                return [f"warm up {step.mode} @ {step.capacity}: {step.requests} request(s)"]
            case MeasureRows():
                return [f"measure {step.name} @ {step.capacity}: {len(step.rows)} rows, one "
                        "after another"]
            case MeasurePoint():
                return [f"measure {step.mode} @ {step.capacity} at {step.point.label}: "
                        f"{step.point.describe()}"]
            case Search():
                s = step.search
                return [f"search {step.mode} @ {step.capacity}: the highest rate in "
                        f"{s.low:g}..{s.high:g} req/s meeting the objectives, each rate "
                        f"{s.repetitions} time(s)"]
            case Stop():
                return [f"stop {step.mode} @ {step.capacity}"]
