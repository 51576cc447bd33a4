"""The ``sessions`` dataset kind: kvlab's session JSONL, one line per turn.

::

    {"session": "s1", "turn": 1, "messages": [{"role": "system", "content": "..."},
                                              {"role": "user", "content": "..."}]}
    {"session": "s1", "turn": 2, "think_ms": 800, "input_tokens": 64, "output_tokens": 32}
    {"session": "s1", "turn": 3, "role": "tool", "input_tokens": 40, "hash_ids": [1, 2, 3]}

- ``session`` (a string or a number) and ``turn`` (1, 2, ... in file order within a
  session; sessions may interleave in the file);
- ``think_ms`` (default: the table's ``think_ms``): the wait between the previous
  answer's end and this turn's send;
- either ``messages`` (``{role, content}``, roles ``system``, ``user``, ``tool``: the
  text the turn adds, sent as written) or ``input_tokens`` (a text of exactly that many
  tokens, as the message of ``role``, default ``user``);
- ``output_tokens`` (default: ``[workload] output_tokens``);
- ``hash_ids`` (optional, as in Mooncake: one id per ``block_tokens`` tokens of the
  turn's whole prompt): what a prefix cache should find, checked against what it did;
- ``answer`` (optional): the recorded answer. It is sent as history instead of the
  server's answer only with ``replay_answers = true``; else the server's own answer is;
- ``chain`` and ``after`` (optional, an agent's subagents): the turn's chain (default:
  the main one) and the turns of other chains it waits for, written ``t2`` or
  ``<chain>.t3`` within its session.

Bad lines are refused with ``file:line``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from kvlab.bench.plan.dataset import FileDatasetSettings, WorkloadFacts
from kvlab.bench.plan.rows import FileRow, read_jsonl
from kvlab.bench.plan.sessions.rows import (
    ROLES,
    SessionRows,
    ThinkMs,
    TurnRow,
    describe_think,
)
from kvlab.rundir.session_turn import MAIN


class SessionsDataset(FileDatasetSettings):
    """``[workload.dataset] kind = "sessions"``: ``rows`` is the number of sessions read
    (the first N to appear; default all)."""

    kind: Literal["sessions"] = "sessions"
    session_turns: ClassVar[bool] = True
    think_ms: float = Field(default=0.0, ge=0)  # a turn that gives none
    block_tokens: int = Field(default=512, ge=1)  # tokens per hash id
    replay_answers: bool = False  # history: the file's answers, not the server's

    def build(self, workload: WorkloadFacts) -> SessionRows:
        rows: list[TurnRow] = []
        kept: set[str] = set()
        for line in read_jsonl(Path(self.path)):
            row = session_turn(line, self.think_ms, self.block_tokens, self.replay_answers)
            if row.session not in kept and self.rows is not None and len(kept) >= self.rows:
                continue
            kept.add(row.session)
            rows.append(row)
        return SessionRows(rows)

    def prompt_rule(self, prompt_fraction: float) -> str:
        history = ("the file's answers" if self.replay_answers
                   else "the server's own answers")
        return (f"Sessions of {self.path}, one turn per line; each turn sends its session's "
                f"history ({history}) as chat messages, then its own messages (as written, "
                f"or sized to input_tokens exactly), after its think time (default "
                f"{describe_think(self.think_ms)}).")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def session_turn(line: FileRow, think_ms: ThinkMs, block_tokens: int, replay: bool
                 ) -> TurnRow:
    """One line read; ConfigError (``file:line``) for a field that is missing or wrong."""
    data = line.data
    session = data.get("session")
    if isinstance(session, bool) or not isinstance(session, (str, int)) or session == "":
        raise line.error("no session: give each line its session's id")
    turn = data.get("turn")
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        raise line.error("turn must be a whole number from 1")
    think = data.get("think_ms", think_ms)
    if isinstance(think, bool) or not isinstance(think, (int, float)) or think < 0:
        raise line.error(f"think_ms {think!r} is not a time in ms (>= 0)")
    messages = _messages(line)
    inputs = line.length("input_tokens", "input_tokens")
    if (messages is None) == (inputs is None):
        raise line.error("give the turn's messages or its input_tokens, one of them")
    if inputs == 0:
        raise line.error("input_tokens is 0; a turn adds at least 1 token")
    role = data.get("role", "user")
    if role not in ROLES:
        raise line.error(f"role {role!r} is not one of {', '.join(ROLES)}")
    output = line.length("output_tokens", "output_tokens")
    if output == 0:
        raise line.error("output_tokens is 0; a turn asks for at least 1 token")
    answer = data.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise line.error("answer must be the recorded answer's text")
    if replay and answer is None:
        raise line.error("replay_answers = true sends the file's answers as history; this "
                         "turn has no answer")
    hash_ids = data.get("hash_ids", [])
    if not isinstance(hash_ids, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in hash_ids):
        raise line.error("hash_ids must be a list of whole numbers, none negative")
    chain = data.get("chain", MAIN)
    after = data.get("after", [])
    if not isinstance(chain, str) or not isinstance(after, list) \
            or not all(isinstance(a, str) for a in after):
        raise line.error("chain is a name and after a list of turns (t2, <chain>.t3)")
    sid = str(session)
    return TurnRow(sid, turn, line.where, chain, float(think), messages, inputs,
                   role, output, tuple(f"{sid}.{a}" for a in after), answer, replay,
                   tuple(hash_ids), None, block_tokens if hash_ids else None)


def _messages(line: FileRow) -> tuple[tuple[str, str], ...] | None:
    raw = line.data.get("messages")
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise line.error("messages must be a non-empty list of {role, content}")
    out = []
    for i, message in enumerate(raw):
        role = message.get("role") if isinstance(message, dict) else None
        content = _text(message.get("content")) if isinstance(message, dict) else None
        if role not in ROLES or content is None or not content.strip():
            raise line.error(f"messages[{i}] must have a role ({', '.join(ROLES)}) and "
                             "non-empty text content")
        out.append((str(role), content))
    return tuple(out)
