"""A session dataset: turns as a reader gives them, sized per capacity into prompts.

Every session kind (``sessions``, ``sharegpt-sessions``, ``weka``, ``random-sessions``)
reads its source into :class:`TurnRow` values and hands them to :class:`SessionRows`,
the :class:`~kvlab.bench.plan.dataset.Dataset` a sessions load sends. A turn gives
either its messages' text (sent as written) or a length: one message of its ``role``
whose text kvlab sizes to exactly ``input_tokens`` tokens with the run's token counter
(:mod:`kvlab.bench.plan.exact`; each turn's text opens with its own tag, so no two turns
share a prefix by accident). A turn with ``hash_ids`` that opens a chain is built block
by block instead, as a Mooncake trace's prompt is (:mod:`kvlab.bench.plan.trace`): equal
ids, equal text, so sessions sharing leading blocks share that prefix.

Each prepared prompt is one turn: ``prompt`` is the text it adds (its messages joined
by blank lines), ``tokens`` the count of its messages' texts (the turn's new input),
``output_tokens`` the answer it asks for, and ``session`` the
:class:`~kvlab.rundir.session_turn.SessionTurn`. A session whose turns and answers
add up past the capacity is refused with the ``file:line`` of the turn that overflows.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from kvlab.bench.plan.exact import fit_tokens, row_tag
from kvlab.bench.plan.lengths import Lengths
from kvlab.bench.plan.textrows import QUERY_CHARS, OutputBounds
from kvlab.bench.plan.workload import PreparedPrompt, Query, Tokenizer, sha256
from kvlab.errors import ConfigError
from kvlab.rundir.session_turn import MAIN, SessionTurn, turn_id

ROLES = ("system", "user", "tool")  # what a turn may add (the server answers as assistant)
BlockKey = tuple[str | None, int] | tuple[str, int, int]  # (scope, hash id) or a turn's own


@dataclass(frozen=True)
class TurnRow:
    """One turn before sizing: where it sits (``session``, ``chain``, ``index`` from 1;
    ``source``, ``file:line``), when it goes (``think_ms`` after the answers it waits for:
    its chain's previous turn and ``after``) and what it adds: ``messages`` as written,
    or one message of ``role`` sized to ``input_tokens``. ``output_tokens``: the answer
    it asks for (None: the length of ``answer`` if given, else the workload's);
    ``answer``: the file's answer (sent as history only with ``replay``);
    ``hash_ids``/``hash_scope``/``block_tokens``: the trace's blocks of its whole
    prompt; ``stop``: the trace's stop reason."""

    session: str
    index: int
    source: str
    chain: str = MAIN
    think_ms: float = 0.0
    messages: tuple[tuple[str, str], ...] | None = None
    input_tokens: int | None = None
    role: str = "user"
    output_tokens: int | None = None
    after: tuple[str, ...] = ()
    answer: str | None = None
    replay: bool = False
    hash_ids: tuple[int, ...] = ()
    hash_scope: str | None = None
    block_tokens: int | None = None
    stop: str | None = None

    @property
    def query_id(self) -> str:
        return turn_id(self.session, self.index, self.chain)

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.input_tokens is None):
            raise ValueError("a turn gives its messages or its input_tokens, one of them")


def check_order(rows: Sequence[TurnRow]) -> None:
    """ConfigError (``file:line``) when a turn waits for a turn not before it in its
    session, or a chain's indices are not 1, 2, ... in order, or a query id repeats."""
    seen: set[str] = set()
    last: dict[tuple[str, str], int] = {}
    for row in rows:
        if row.query_id in seen:
            raise ConfigError(f"{row.source}: turn {row.query_id} is given twice")
        expected = last.get((row.session, row.chain), 0) + 1
        if row.index != expected:
            raise ConfigError(f"{row.source}: session {row.session}: turn {row.index} "
                              f"follows turn {expected - 1}; number a session's turns 1, 2, "
                              "... in order")
        for other in row.after:
            if other not in seen or not other.startswith(f"{row.session}."):
                raise ConfigError(f"{row.source}: turn {row.query_id} waits for {other}, "
                                  "which is not an earlier turn of its session")
        last[(row.session, row.chain)] = row.index
        seen.add(row.query_id)


class SessionRows:
    """The turns of a session dataset (the Dataset interface); see the module doc."""

    def __init__(self, rows: Sequence[TurnRow], bounds: OutputBounds | None = None) -> None:
        check_order(rows)
        self._rows = list(rows)
        self._bounds = bounds or OutputBounds(low=1)
        self._sessions = {s: i for i, s in enumerate(dict.fromkeys(r.session for r in rows))}

    def queries(self) -> list[Query]:
        return [Query(r.query_id, self._describe(r)) for r in self._rows]

    @staticmethod
    def _describe(row: TurnRow) -> str:
        what = (f"{row.input_tokens} {row.role} tokens" if row.input_tokens is not None
                else " + ".join(role for role, _ in row.messages or ()))
        return f"session {row.session} turn {row.index}" + \
            (f" of {row.chain}" if row.chain else "") + f": {what}"

    async def prepare(self, counter: Tokenizer, capacity: int, prompt_fraction: float,
                      output_tokens: int) -> tuple[int, list[PreparedPrompt]]:
        """Every turn sized; ConfigError (``file:line``) for the turn at which its chain's
        inputs and answers pass ``capacity`` (``prompt_fraction`` does not apply)."""
        blocks: dict[BlockKey, str] = {}
        totals: dict[tuple[str, str], int] = {}
        prompts = []
        for row in self._rows:
            messages = row.messages if row.messages is not None \
                else ((row.role, await self._sized(counter, row, blocks)),)
            tokens = 0
            for _, content in messages:
                tokens += await counter(content)
            output = row.output_tokens if row.output_tokens is not None \
                else self._bounds.clip(await counter(row.answer)) if row.answer is not None \
                else output_tokens
            key = (row.session, row.chain)
            totals[key] = totals.get(key, 0) + tokens + output
            if totals[key] > capacity:
                raise ConfigError(
                    f"{row.source}: session {row.session}: its conversation reaches "
                    f"{totals[key]} tokens (new inputs and answers) at turn {row.query_id}, "
                    f"over the capacity {capacity}; drop turns or raise the capacity")
            text = "\n\n".join(content for _, content in messages)
            turn = SessionTurn(row.session, row.index, row.chain, row.think_ms,
                               tuple(messages), row.after,
                               row.answer if row.replay else None, row.hash_ids,
                               row.hash_scope, row.block_tokens, row.stop)
            prompts.append(PreparedPrompt(
                row.query_id, text[:QUERY_CHARS], text, sha256(text), tokens,
                output_tokens=output, target_tokens=row.input_tokens, source=row.source,
                conversation=row.session, turn=row.index, session=turn))
        return 0, prompts

    async def _sized(self, counter: Tokenizer, row: TurnRow, blocks: dict[BlockKey, str]
                     ) -> str:
        """The text of a turn given by its length: block by block for a chain's first
        turn with hash_ids, else its own tag and kvlab's prose."""
        assert row.input_tokens is not None
        tag = f"{row_tag(self._sessions[row.session])}.{row.chain or 'm'}{row.index}"
        if not row.hash_ids or row.index != 1 or row.block_tokens is None:
            return await fit_closed(counter, f"{tag}: ", row.input_tokens, row.source)
        size = row.block_tokens
        count = math.ceil(row.input_tokens / size)
        keys: list[BlockKey] = [(row.hash_scope, h) for h in row.hash_ids[:count]]
        keys += [(row.query_id, 0, j) for j in range(len(keys), count)]
        for key in keys:
            if key not in blocks:
                name = f"{tag}~{key[2]}" if len(key) == 3 else row_tag(key[1]) \
                    if key[0] is None else f"{key[0]}:{row_tag(key[1])}"
                sized = await fit_tokens(counter, f"{name}: ", size - 1,
                                         f"{row.source}: block {name}")
                blocks[key] = sized.text + "\n"
        head = "".join(blocks[k] for k in keys[:-1])
        try:
            sized = await fit_tokens(counter, head, row.input_tokens, row.source,
                                     filler=blocks[keys[-1]])
        except ConfigError as exc:
            raise ConfigError(f"{exc}; do its hash_ids match its input length?") from None
        return sized.text


CLOSING_PIECES = ("a", " a", "a a", " a a", "1", " 1")  # tried after a shorter fit


def closed(text: str) -> bool:
    """``text`` ends on a letter, a digit or a newline: the next message's template text
    (ChatML's ``<|im_end|>``) then starts a token of its own. After a space or a
    punctuation mark, Gemma's tokenizer merges the two (``,<``), and the turn would count
    one token less inside the conversation than alone."""
    return text[-1:].isalnum() or text.endswith("\n")


async def fit_closed(counter: Tokenizer, head: str, target: int, what: str) -> str:
    """:func:`~kvlab.bench.plan.exact.fit_tokens`'s text of exactly ``target`` tokens,
    ending :func:`closed`: where the fit does not, a shorter fit (or the head alone) plus
    a closing piece."""
    sized = await fit_tokens(counter, head, target, what)
    if closed(sized.text):
        return sized.text
    bases = [head.rstrip()]
    for short in range(1, min(4, target) + 1):
        with contextlib.suppress(ConfigError):
            bases.insert(-1, (await fit_tokens(counter, head, target - short, what)).text)
    for base in bases:
        for piece in CLOSING_PIECES:
            if closed(base + piece) and await counter(base + piece) == target:
                return base + piece
    raise ConfigError(f"{what}: cannot make a text of exactly {target} tokens that ends "
                      "on a letter or digit with this tokenizer; ask for another length")


ThinkMs = float | Lengths  # a think time (ms): one value, or a distribution to draw from


def think_times(think: ThinkMs, rng: random.Random, n: int) -> list[float]:
    """``n`` think times (ms): ``think`` itself, or drawn from it with ``rng``."""
    if isinstance(think, Lengths):
        return [float(t) for t in think.draw(rng, n)]
    return [float(think)] * n


def describe_think(think: ThinkMs) -> str:
    """A think time in words: ``250 ms`` or ``uniform 100..400 ms``."""
    return f"{think.describe()} ms" if isinstance(think, Lengths) else f"{think:g} ms"
