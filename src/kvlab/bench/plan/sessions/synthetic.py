"""The ``random-sessions`` dataset kind: synthetic sessions of drawn lengths.

::

    [workload.dataset]
    kind = "random-sessions"
    sessions = 8
    seed = 7
    turns = { distribution = "fixed", value = 4 }            # turns per session
    first_input = { distribution = "fixed", value = 256 }   # turn 1's new input (default: input)
    input = { distribution = "uniform", min = 24, max = 40 } # each later turn's new input
    output = { distribution = "fixed", value = 16 }          # default: [workload] output_tokens
    think_ms = 200                                           # or a distribution, ms

Every length is drawn from :mod:`kvlab.bench.plan.lengths` (from ``seed``: the same
sessions at every capacity and on every run), and each turn's text is sized to its
length exactly by the run's token counter. Turn 1 goes out when its session starts;
each later one ``think_ms`` after the previous answer ended.
"""

from __future__ import annotations

import random
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from kvlab.bench.plan.dataset import DatasetSettings, WorkloadFacts
from kvlab.bench.plan.lengths import Lengths
from kvlab.bench.plan.sessions.rows import (
    SessionRows,
    ThinkMs,
    TurnRow,
    describe_think,
    think_times,
)


class RandomSessions(DatasetSettings):
    """``[workload.dataset] kind = "random-sessions"``: ``sessions`` synthetic sessions."""

    kind: Literal["random-sessions"] = "random-sessions"
    session_turns: ClassVar[bool] = True
    sessions: int = Field(default=8, ge=1)
    seed: int = 42
    turns: Lengths
    input: Lengths  # new input tokens of each turn after the first
    first_input: Lengths | None = None  # the first turn's (default: input)
    output: Lengths | None = None  # None: [workload] output_tokens
    think_ms: ThinkMs = 0.0

    @model_validator(mode="after")
    def _think(self) -> RandomSessions:
        if isinstance(self.think_ms, float) and self.think_ms < 0:
            raise ValueError("think_ms must be >= 0")
        return self

    def build(self, workload: WorkloadFacts) -> SessionRows:
        rng = random.Random(self.seed)
        counts = self.turns.draw(rng, self.sessions)
        rows: list[TurnRow] = []
        for s, turns in enumerate(counts):
            session = f"s{s:0{max(2, len(str(self.sessions - 1)))}d}"
            first = (self.first_input or self.input).draw(rng, 1)
            later = self.input.draw(rng, turns - 1)
            outputs = self.output.draw(rng, turns) if self.output is not None \
                else [None] * turns
            think = [0.0, *think_times(self.think_ms, rng, turns - 1)]
            for k, (inputs, output, wait) in enumerate(
                    zip(first + later, outputs, think, strict=True), start=1):
                rows.append(TurnRow(session, k, f"random session {session} turn {k}",
                                    think_ms=wait, input_tokens=inputs,
                                    output_tokens=output))
        return SessionRows(rows)

    def prompt_rule(self, prompt_fraction: float) -> str:
        first = f"turn 1 {self.first_input.describe()} tokens, " if self.first_input else ""
        output = self.output.describe() if self.output else "[workload] output_tokens"
        return (f"Sessions = {self.sessions} synthetic sessions (seed {self.seed}) of "
                f"{self.turns.describe()} turns: {first}new input {self.input.describe()} "
                f"tokens per turn, output {output}, think time "
                f"{describe_think(self.think_ms)}; each turn sends the history (the "
                "server's own answers) as chat messages, then its new text, sized exactly.")
