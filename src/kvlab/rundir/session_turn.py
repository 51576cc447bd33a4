"""One turn of a session, as planned: where it sits and what it adds to the conversation.

A **session** is an ordered list of turns sent as one conversation: each turn goes out
only once the answers it waits for have fully arrived, plus its think time, and sends
the whole history (its chain's earlier turns and the server's actual answers to them)
as chat messages, then the messages it adds. An agent trace's session has more than
one **chain**: the main one (``chain = ""``) and subagent chains, each its own
conversation, which spawn after a turn of another chain (``after``) and which a later
turn of the parent joins (``after`` again: it waits for their last turns).

:class:`SessionTurn` is what a prepared prompt (``prepared.json``) keeps of its turn,
so a resumed run and the reports read the sessions back as they were planned.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MAIN = ""  # the name of a session's main chain


def turn_id(session: str, index: int, chain: str = MAIN) -> str:
    """The query id of a turn: ``<session>.t<index>`` (a subagent chain's:
    ``<session>.<chain>.t<index>``)."""
    return f"{session}.{chain}.t{index}" if chain else f"{session}.t{index}"


@dataclass(frozen=True)
class SessionTurn:
    """One turn: its session, chain and index (from 1) in the chain; ``think_ms``, the
    wait after the answers it waits for have arrived (ms); ``messages``, the (role,
    content) messages it adds after its chain's history; ``after``, query ids of other
    chains' turns whose answers it also waits for (a subagent chain's spawn, a join);
    ``answer``, the file's answer sent as history instead of the server's (replay of
    recorded text; None: the server's); ``hash_ids``, the trace's prefix-block ids of the
    turn's whole prompt (``block_tokens`` tokens each; ``hash_scope`` None: ids shared by
    every session, else their namespace); ``stop``, the trace's stop reason
    (``tool_use``, ``end_turn``), kept for the reports."""

    session: str
    index: int
    chain: str = MAIN
    think_ms: float = 0.0
    messages: tuple[tuple[str, str], ...] = ()
    after: tuple[str, ...] = ()
    answer: str | None = None
    hash_ids: tuple[int, ...] = ()
    hash_scope: str | None = None
    block_tokens: int | None = None
    stop: str | None = None

    @property
    def query_id(self) -> str:
        return turn_id(self.session, self.index, self.chain)

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles of the messages it adds, in order."""
        return tuple(role for role, _ in self.messages)

    def to_json(self) -> dict[str, Any]:
        """Its JSON, defaults left out."""
        data = asdict(self)
        defaults = SessionTurn(self.session, self.index)
        return {k: v for k, v in data.items()
                if k in ("session", "index") or v != getattr(defaults, k)}
