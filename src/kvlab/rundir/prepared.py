"""``prepared.json``: the prompts every mode sends, per capacity, as ``prepare`` sized
them (:class:`Prepared`, one :class:`PreparedPrompt` per row), saved once sized so a
resumed run and the reports send and read the same prompts."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from kvlab.rundir.session_turn import SessionTurn


@dataclass
class Sizing:
    """Which method counted a capacity's prompt tokens, and with what (the methods:
    ``bench.plan.sizing.METHODS``; prepared.json and the manifest keep it per capacity).

    ``source``: the URL counted against (no credentials) or the tokenizer file;
    ``sha256``: the tokenizer file's hash (None otherwise); ``probes``: requests the
    calibration sent (0 for the other methods)."""

    method: str
    source: str
    sha256: str | None = None
    probes: int = 0

    def to_json(self) -> dict[str, str | int | None]:
        return asdict(self)

    def describe(self) -> str:
        """One phrase for a report line."""
        if self.method == "api-count":
            return f"the API's own count of a request's prompt ({self.source})"
        if self.method == "server-tokenize":
            return f"the server's POST /tokenize ({self.source})"
        if self.method == "tokenizer-file":
            return f"the tokenizer file {self.source} (sha256 {(self.sha256 or '')[:12]}…)"
        return (f"calibration on the server's usage.prompt_tokens ({self.source}, "
                f"{self.probes} probe requests)")


@dataclass
class PreparedPrompt:
    """One prompt as sent: query id, text, SHA-256 and the tokenizer's count.

    A dataset row also says what it asks for, where it came from and where it sits:
    ``output_tokens`` (None: the workload's ``output_tokens``), ``target_tokens`` (the
    prompt length it asked for, tokens; None: none), ``source`` (``file:line``),
    ``arrival_ms`` (a trace's arrival time), ``conversation`` and ``turn`` (a
    multi-turn row: turn 1, 2, ... of one conversation), ``prefix_group`` (the rows
    sharing one prefix) and ``prefix_tokens`` (its length, tokens), ``blocks`` (a trace
    row's block names in order, one per ``block_tokens`` prompt tokens: its hash ids,
    ``"3~2"`` for block 2 that is row 3's own). A session's turn
    (``session``) is sent by a sessions load: ``prompt`` is the text it adds, ``tokens``
    that text's count (the new input), and its history is the server's answers."""

    query_id: str
    query: str
    prompt: str
    sha256: str
    tokens: int
    output_tokens: int | None = None
    target_tokens: int | None = None
    source: str | None = None
    arrival_ms: float | None = None
    conversation: str | None = None
    turn: int | None = None
    prefix_group: str | None = None
    prefix_tokens: int | None = None
    blocks: list[str] | None = None
    block_tokens: int | None = None
    session: SessionTurn | None = None

    def asked_output(self, default: int) -> int:
        """The output tokens this row asks for (``default``: the workload's)."""
        return self.output_tokens if self.output_tokens is not None else default


_ALWAYS = ("query_id", "query", "prompt", "sha256", "tokens")


def _prompt_json(prompt: PreparedPrompt) -> dict[str, Any]:
    """A prompt's JSON: a dataset row's facts only where it has them."""
    data = {k: v for k, v in asdict(prompt).items() if k in _ALWAYS or v is not None}
    if prompt.session is not None:
        data["session"] = prompt.session.to_json()
    return data


@dataclass
class Prepared:
    """Everything ``prepare`` decided; saved as ``prepared.json`` in the run dir."""

    queries_per_mode: int
    modes: list[str]
    capacities: list[int]
    output_tokens: int
    prompt_fraction: float
    padding_tokens: dict[int, int] = field(default_factory=dict)
    prompts: dict[int, list[PreparedPrompt]] = field(default_factory=dict)
    sizing: dict[int, Sizing] = field(default_factory=dict)  # how each capacity was counted

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["padding_tokens"] = {str(k): v for k, v in self.padding_tokens.items()}
        data["sizing"] = {str(k): v.to_json() for k, v in self.sizing.items()}
        data["prompts"] = {str(k): [_prompt_json(p) for p in v]
                           for k, v in self.prompts.items()}
        return data

    @classmethod
    def from_json(cls, data: object) -> Prepared:
        """``prepared.json``'s data, validated by its types (a capacity key read as an
        int, a session's turn as :class:`SessionTurn`, defaults where :meth:`to_json`
        left them out); a pydantic ValidationError (a ValueError) naming the key when it
        does not read."""
        return _READ.validate_python(data)

    def dumps(self) -> str:
        """``prepared.json``'s text."""
        return json.dumps(self.to_json(), indent=2) + "\n"

    def save(self, path: Path) -> None:
        Path(path).write_text(self.dumps(), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Prepared:
        return _READ.validate_json(Path(path).read_text(encoding="utf-8"))


_READ = TypeAdapter(Prepared)
