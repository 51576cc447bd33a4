"""The ``sharegpt-sessions`` dataset kind: ShareGPT conversations sent as sessions.

The file is ShareGPT's layout (a JSON array or JSONL of ``{"id", "conversations":
[{"from": "human"|"gpt"|"system", "value"}]}``; ``messages`` with ``role``/``content``
and the roles ``user``/``assistant`` are read too), as the ``sharegpt`` kind reads it.
Each conversation is one session: turn ``k`` adds the ``k``-th human message (turn 1
also a leading system message) and asks for as many tokens as the answer that follows
it counts (at least ``min_output_tokens``, at most ``max_output_tokens``); the session
sends the server's own answers as history unless ``replay_answers = true`` asks for the
file's. A conversation ends at its first turn that is not a human message answered.
Think times are ``think_ms``: one value, or a distribution drawn from ``seed``.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from kvlab.bench.plan.dataset import FileDatasetSettings, WorkloadFacts
from kvlab.bench.plan.rows import FileRow, read_json_array
from kvlab.bench.plan.sessions.rows import (
    SessionRows,
    ThinkMs,
    TurnRow,
    describe_think,
    think_times,
)
from kvlab.bench.plan.textrows import OutputBounds

_ROLE = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
         "chatgpt": "assistant", "bard": "assistant", "system": "system"}


class ShareGptSessions(FileDatasetSettings):
    """``[workload.dataset] kind = "sharegpt-sessions"``: ``rows`` is the number of
    conversations read (the first N; default all)."""

    kind: Literal["sharegpt-sessions"] = "sharegpt-sessions"
    session_turns: ClassVar[bool] = True
    max_turns: int | None = Field(default=None, ge=1)  # turns per session (default all)
    think_ms: ThinkMs = 0.0
    seed: int = 42  # think times drawn from a distribution
    min_output_tokens: int = Field(default=2, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    replay_answers: bool = False  # history: the file's answers, not the server's

    @model_validator(mode="after")
    def _bounds(self) -> ShareGptSessions:
        if self.max_output_tokens is not None and self.max_output_tokens < self.min_output_tokens:
            raise ValueError("max_output_tokens is below min_output_tokens")
        if isinstance(self.think_ms, float) and self.think_ms < 0:
            raise ValueError("think_ms must be >= 0")
        return self

    def build(self, workload: WorkloadFacts) -> SessionRows:
        rows: list[TurnRow] = []
        for item in read_json_array(Path(self.path))[:self.rows]:
            rows += conversation_turns(item, self.max_turns, self.replay_answers)
        think = think_times(self.think_ms, random.Random(self.seed), len(rows))
        rows = [r if r.index == 1 else replace(r, think_ms=t)
                for r, t in zip(rows, think, strict=True)]
        return SessionRows(rows, OutputBounds(self.min_output_tokens, self.max_output_tokens))

    def prompt_rule(self, prompt_fraction: float) -> str:
        history = ("the file's answers" if self.replay_answers
                   else "the server's own answers")
        return (f"Sessions = the conversations of {self.path}: turn k sends the history "
                f"({history}) as chat messages, then the k-th human message, after a think "
                f"time of {describe_think(self.think_ms)}; each turn asks for as many tokens "
                "as the file's answer to it counts.")


def _said(row: FileRow) -> list[tuple[str, str]]:
    turns: Any = row.data.get("conversations", row.data.get("messages"))
    if not isinstance(turns, list):
        raise row.error("no prompt: the conversation has no 'conversations' list")
    out = []
    for turn in turns:
        if not isinstance(turn, dict):
            raise row.error("a turn is not an object with 'from' and 'value'")
        role = _ROLE.get(str(turn.get("from", turn.get("role", ""))).lower(), "")
        text = turn.get("value", turn.get("content"))
        out.append((role, text if isinstance(text, str) else ""))
    return out


def conversation_turns(row: FileRow, max_turns: int | None, replay: bool) -> list[TurnRow]:
    """The turns of one conversation; ConfigError (``file:line``) when its first human
    message has no answer."""
    session = str(row.data.get("id") or f"line{row.line}")
    said = _said(row)
    system = said[:1] if said and said[0][0] == "system" and said[0][1].strip() else []
    said = said[len(system):]
    turns: list[TurnRow] = []
    for k in range(0, len(said) - 1, 2):
        (asker, question), (answerer, answer) = said[k], said[k + 1]
        if asker != "user" or answerer != "assistant" or not question.strip() \
                or not answer.strip() or (max_turns is not None and len(turns) >= max_turns):
            break
        messages = (*(system if not turns else ()), ("user", question))
        turns.append(TurnRow(session, len(turns) + 1, row.where, messages=tuple(messages),
                             answer=answer, replay=replay))
    if not turns:
        raise row.error(f"conversation {session}: no human message followed by an answer "
                        "(the answer's length is the turn's output length)")
    return turns
