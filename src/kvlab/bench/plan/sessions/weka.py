"""The ``weka`` dataset kind: WEKA agentic traces (Claude Code sessions) as sessions.

A trace (WEKA's ``TRACE_FORMAT``, as GuideLLM 0.8.1's ``weka`` reader takes it) is one
conversation per JSON object, a file of one object, a JSON array of them, or JSONL::

    {"id": "8712b46f-04e", "block_size": 64, "hash_id_scope": "global",
     "requests": [
       {"t": 0.0, "in": 2100, "out": 40, "hash_ids": [1, 2, ...], "stop": "tool_use",
        "input_types": ["text"], "api_time": 1.2},
       {"t": 3.5, "in": 2300, "out": 60, "input_types": ["tool_result"], "think_time": 2.0},
       {"t": 9.0, "type": "subagent", "agent_id": "a44c", "requests": [...]},
       {"t": 30.0, "in": 2700, "out": 80, "input_types": ["text"], "stop": "end_turn"}]}

Each conversation is one session. ``in`` is a request's whole prompt (tokens) and
``hash_ids`` its full blocks of ``block_size`` tokens (the file's, else the table's
``block_tokens``), so a request adds ``in − (in and out of the request before it)``
tokens: the first request of a chain is sized to its whole ``in`` (built block by block
from its hash ids: equal ids, equal text, across conversations unless
``hash_id_scope = "local"``), each later one to that difference, as a message of role
``tool`` after ``stop: tool_use`` or with ``input_types: ["tool_result"]`` (the trace's
tool results, replayed as given: nothing is executed), else ``user``. ``out`` is the
answer's length. A ``type: "subagent"`` group is a chain of its own: a fresh
conversation that starts after the parent's request before it, runs beside the
subagents next to it, and which the parent's next request waits for (a join). A request
whose prompt does not grow (a context reset) starts a new chain after the one before.

Think times: a request's ``think_time`` (s), else the gap from the previous request's
end (``t + api_time``) to its ``t``; times ``think_scale`` (and at most
``max_think_ms``). Bad conversations are refused with ``file:line``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from kvlab.bench.plan.dataset import FileDatasetSettings, WorkloadFacts
from kvlab.bench.plan.rows import FileRow, read_json_array, read_text
from kvlab.bench.plan.sessions.rows import SessionRows, TurnRow
from kvlab.rundir.session_turn import MAIN


class WekaDataset(FileDatasetSettings):
    """``[workload.dataset] kind = "weka"``: ``rows`` is the number of conversations read
    (the first N; default all)."""

    kind: Literal["weka"] = "weka"
    session_turns: ClassVar[bool] = True
    block_tokens: int = Field(default=64, ge=1)  # per hash id, where a trace says none
    think_scale: float = Field(default=1.0, ge=0)  # the trace's think times times this
    max_think_ms: float | None = Field(default=None, ge=0)  # and at most this
    tool_role: Literal["tool", "user"] = "tool"  # the role of a tool result

    def build(self, workload: WorkloadFacts) -> SessionRows:
        rows: list[TurnRow] = []
        for item in conversations(Path(self.path))[:self.rows]:
            rows += Conversation(item, self).turns()
        return SessionRows(rows)

    def prompt_rule(self, prompt_fraction: float) -> str:
        scale = f" x {self.think_scale:g}" if self.think_scale != 1 else ""
        return (f"Sessions = the conversations of the WEKA trace {self.path}: each request "
                "sends its chain's history (the server's own answers) as chat messages, "
                "then what the trace says it adds (in minus the request before it and its "
                f"answer; tool results as {self.tool_role} messages), sized exactly, after "
                f"the trace's think time{scale}; subagents run as chains of their own.")


def conversations(path: Path) -> list[FileRow]:
    """The conversations of a trace file: one JSON object, a JSON array or JSONL."""
    text = read_text(path)
    if text.lstrip().startswith("{"):
        try:
            item = json.loads(text)
        except json.JSONDecodeError:
            item = None
        if isinstance(item, dict):
            return [FileRow(str(path), 1 + text.count("\n", 0, text.index("{")), item)]
    return read_json_array(path)


class Conversation:
    """One conversation walked into turns (see the module doc)."""

    def __init__(self, row: FileRow, table: WekaDataset) -> None:
        self.row, self.table = row, table
        self.session = str(row.data.get("id") or f"line{row.line}")
        size = row.data.get("block_size", table.block_tokens)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise row.error(f"block_size {size!r} is not a number of tokens")
        self.block = size
        self.scope = self.session if row.data.get("hash_id_scope") == "local" else None
        self.out: list[TurnRow] = []
        self.spawned = 0

    def turns(self) -> list[TurnRow]:
        requests = self.row.data.get("requests")
        if not isinstance(requests, list) or not requests:
            raise self.row.error(f"conversation {self.session}: no 'requests' list")
        self.chain(requests, MAIN, ())
        if not self.out:
            raise self.row.error(f"conversation {self.session}: no request to replay")
        return self.out

    def chain(self, requests: list[Any], name: str, spawn: tuple[str, ...]) -> str | None:
        """Walk one chain's requests into turns; returns its last turn's id."""
        last: TurnRow | None = None
        prev: dict[str, Any] | None = None
        joins: list[str] = []
        resets = 0
        for k, item in enumerate(requests, start=1):
            where = f"conversation {self.session} request {k}" + (f" of {name}" if name else "")
            if not isinstance(item, dict):
                raise self.row.error(f"{where}: not an object")
            if item.get("type") == "subagent":
                inner = item.get("requests")
                if not isinstance(inner, list) or not inner:
                    raise self.row.error(f"{where}: a subagent without requests")
                self.spawned += 1
                child = self.chain(inner, f"sa{self.spawned}",
                                   (last.query_id,) if last else spawn)
                if child is not None:
                    joins.append(child)
                continue
            size, out = self.length(item, "in", where), self.length(item, "out", where)
            fresh = prev is None
            added = size if prev is None else size - int(prev["in"]) - int(prev["out"])
            if added < 1:  # a context reset: a new chain, after the one before
                resets += 1
                name, added, fresh = f"{name or 'm'}r{resets}", size, True
                joins = [last.query_id, *joins] if last is not None else joins
            index = 1 if fresh else (last.index + 1 if last else 1)
            after = (spawn if last is None else ()) + tuple(joins)
            turn = TurnRow(
                self.session, index, f"{self.row.where}: {where}", name,
                self.think(item, prev), input_tokens=added, role=self.role(item, prev),
                output_tokens=out, after=after, hash_ids=self.hash_ids(item, size, where),
                hash_scope=self.scope, block_tokens=self.block,
                stop=item.get("stop") if isinstance(item.get("stop"), str) else None)
            self.out.append(turn)
            last, prev, joins = turn, item, []
        return last.query_id if last else None

    def length(self, item: dict[str, Any], key: str, where: str) -> int:
        value = item.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.row.error(f"{where}: '{key}' must be a whole number of tokens >= 1")
        return value

    def think(self, item: dict[str, Any], prev: dict[str, Any] | None) -> float:
        """The wait before this request (ms): its think_time, else the gap since the
        previous request's end; scaled and capped."""
        given = item.get("think_time")
        if isinstance(given, (int, float)) and not isinstance(given, bool):
            seconds = float(given)
        elif prev is not None and isinstance(item.get("t"), (int, float)) \
                and isinstance(prev.get("t"), (int, float)):
            busy = prev.get("api_time")
            busy = float(busy) if isinstance(busy, (int, float)) else 0.0
            seconds = float(item["t"]) - float(prev["t"]) - busy
        else:
            seconds = 0.0
        ms = max(0.0, seconds) * 1000.0 * self.table.think_scale
        cap = self.table.max_think_ms
        return ms if cap is None else min(ms, cap)

    def role(self, item: dict[str, Any], prev: dict[str, Any] | None) -> str:
        """``tool_role`` for a tool result (said, or after a tool_use stop), else user."""
        kinds = item.get("input_types")
        result = isinstance(kinds, list) and "tool_result" in kinds
        if not kinds and prev is not None and prev.get("stop") == "tool_use":
            result = True
        return self.table.tool_role if result else "user"

    def hash_ids(self, item: dict[str, Any], size: int, where: str) -> tuple[int, ...]:
        ids = item.get("hash_ids", [])
        if not isinstance(ids, list) or not all(
                isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in ids):
            raise self.row.error(f"{where}: hash_ids must be whole numbers, none negative")
        if len(ids) > -(-size // self.block):
            raise self.row.error(f"{where}: {len(ids)} hash_ids for {size} tokens in blocks "
                                 f"of {self.block}")
        return tuple(ids)

