"""The workload: queries, a padding text sized per capacity, and ``prepared.json``.

A prompt is ``padding(capacity) + "\\n\\n" + query``. With ``f`` the experiment's
``prompt_fraction`` and ``C`` the capacity, the padding is the longest word-aligned
prefix of the padding text that counts at most ``f·C − max(query tokens) − 2`` tokens
(2 for the separator), so the *whole* prompt of the longest query lands at about
``f·C`` tokens and the others a few tokens under it; every mode at one capacity gets
the same prompts, and the prompt length grows with the capacity. Capacity is the
configured context limit, not the prompt length.

Tokens are counted by the method :mod:`kvlab.bench.plan.sizing` picks (the server's
``/tokenize``, a tokenizer file, or calibration on the server's ``usage``); the
prompt tokens each request really cost are what the server reports in its records.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kvlab.errors import ConfigError
from kvlab.rundir.prepared import PreparedPrompt

# Short, varied questions; the answer does not matter (output length is forced).
BUILTIN_QUERIES: tuple[str, ...] = (
    "What does the harbour bell announce at dusk?",
    "Name three things the keeper writes in the logbook.",
    "Why are the lamps trimmed before the storm season?",
    "Summarise the paragraph about the northern pier in one sentence.",
    "How many boats returned on the windy morning?",
    "Explain why the fog horn sounds twice.",
    "Which street leads from the market to the quay?",
    "Describe the colour of the sea after the rain.",
    "What is stored in the stone shed by the slipway?",
    "Who repairs the nets during the winter?",
    "List two reasons the ferry was late.",
    "Translate 'the tide is turning' into plain words a child would use.",
    "What would change if the lighthouse were automated?",
    "Give a title for the story of the lost anchor.",
    "Why do the gulls gather near the fish market?",
    "Compare the old lamp with the new one.",
    "What does the keeper eat on a long night?",
    "Write a short weather report for tomorrow.",
    "How is the distance to the reef measured?",
    "What sound wakes the town in the morning?",
    "Suggest a name for the keeper's dog.",
    "What happens to the logbook when it is full?",
    "Why is the lantern room painted white?",
    "Count the steps to the top, roughly.",
    "What should a visitor bring on a boat trip?",
    "Describe the bakery on the corner of the square.",
    "Which season brings the most visitors, and why?",
    "What does the chart show south of the island?",
    "How do the fishermen read the clouds?",
    "End the story of the harbour in two sentences.",
)

# Our own prose, cycled and numbered until long enough (about 48k characters: over
# 8k tokens of a byte tokenizer and about 10k of a typical BPE tokenizer).
_PADDING_PARAGRAPHS: tuple[str, ...] = (
    "The harbour town sits at the end of a long road that follows the cliffs. In the "
    "morning the fishing boats leave one after another, their engines low and patient, "
    "and the water behind them folds into long grey lines that take minutes to settle.",
    "The lighthouse keeper climbs the tower before sunset. He wipes the glass, checks the "
    "oil and writes the time, the wind and the state of the sea in a thick logbook whose "
    "pages have gone soft at the corners from years of salt air.",
    "On the northern pier the stones are darker, worn by waves that break over them in "
    "winter. Children are told not to walk there when the tide is high, and most of them "
    "walk there anyway, daring each other to touch the iron ring at the very end.",
    "The market opens at seven. Crates of fish are laid on ice, the baker props the door "
    "open so the smell of bread reaches the quay, and the old woman who sells rope and "
    "hooks sits on the same folding chair she has used for thirty years.",
    "When fog rolls in from the west, the horn sounds twice every minute. Sailors say the "
    "second note is for the ones who did not hear the first, and the keeper does not "
    "argue with them, because on some nights it is exactly that.",
    "In the stone shed by the slipway there are oars, paint, spare lamps, a ladder with a "
    "missing rung and a wooden box of charts that nobody has opened since the new radio "
    "was installed. The key hangs on a nail inside the keeper's door.",
    "The ferry crosses to the island three times a day in summer and once a day in winter. "
    "It is late when the wind turns north, late when the captain stops to talk, and "
    "sometimes late for no reason anyone can name.",
    "After rain the sea turns a pale green near the shore and a deep slate blue further "
    "out. Painters come in autumn to catch that change, set their easels on the sea wall, "
    "and complain about the wind that keeps tipping them over.",
    "The nets are repaired in the long shed during the dark months. The work is slow: a "
    "torn square is cut away, a new one is knotted in, and the whole net is laid out again "
    "on the floor so the next tear can be found before the next storm.",
    "At night the beam turns over the water once every ten seconds. From the hill behind "
    "the town it looks like a slow pulse, and people walking home count the flashes "
    "without noticing they do it, the way one counts stairs in a familiar house.",
)


def padding_text(min_chars: int = 48_000) -> str:
    """The full padding text (deterministic), at least ``min_chars`` characters."""
    parts: list[str] = []
    length = 0
    section = 0
    while length < min_chars:
        for paragraph in _PADDING_PARAGRAPHS:
            section += 1
            part = f"{section}. {paragraph}"
            parts.append(part)
            length += len(part) + 2
    return "\n\n".join(parts)


@dataclass(frozen=True)
class Query:
    """One question appended to the padding; ``id`` names it in records."""

    id: str
    text: str


def builtin_queries(count: int = 30) -> list[Query]:
    """The first ``count`` built-in queries, ids q01..q30."""
    if not 1 <= count <= len(BUILTIN_QUERIES):
        raise ConfigError(f"queries must be within 1..{len(BUILTIN_QUERIES)}, got {count}")
    return [Query(f"q{i:02d}", text) for i, text in enumerate(BUILTIN_QUERIES[:count], 1)]


def load_queries(path: Path) -> list[Query]:
    """Custom queries from a JSONL file of ``{"id": ..., "text": ...}`` lines."""
    queries: list[Query] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the queries file ({exc.strerror})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            query = Query(str(item["id"]), str(item["text"]))
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ConfigError(
                f'{path}:{number}: expected a JSON object {{"id": ..., "text": ...}}'
            ) from None
        queries.append(query)
    if not queries:
        raise ConfigError(f"{path}: no queries in the file")
    ids = [q.id for q in queries]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: query ids must be unique")
    return queries


def sha256(text: str) -> str:
    """Hex SHA-256 of a prompt's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_prompt(padding: str, query: Query) -> str:
    """The exact prompt text sent for ``query``."""
    return f"{padding}\n\n{query.text}"


Tokenizer = Callable[[str], Awaitable[int]]  # text -> its token count (see bench.plan.sizing)


async def _refuse_short(tokenizer: Tokenizer, full: str, full_tokens: int,
                        target_tokens: int) -> None:
    """ConfigError for a padding text that counts no more than ``target_tokens``: a
    server that trims prompts (half the text counts as much as all of it) is named,
    with the largest count it returned; else the text is short."""
    half = await tokenizer(full[: full.rfind(" ", 0, len(full) // 2)])
    if half >= full_tokens:
        raise ConfigError(
            f"the server trims prompts: it counted at most {max(half, full_tokens)} tokens "
            f"for a padding text of {len(full)} characters and for half of it alike, so "
            f"no prompt can grow to {target_tokens} tokens; raise the server's prompt or "
            "context limit, or lower the capacity")
    raise ConfigError(f"the padding text is shorter than {target_tokens} tokens")


async def size_padding(tokenizer: Tokenizer, target_tokens: int,
                       full: str | None = None) -> tuple[str, int]:
    """The longest word-aligned prefix of the padding (or of ``full``) with at most
    ``target_tokens`` tokens, and its token count.

    The first cut is estimated from the whole text's tokens per character, then a
    bracket around it is widened (doubling steps) and bisected: about 10 counts instead
    of 14 for a plain bisection, which matters when each count is a probe request."""
    full = padding_text() if full is None else full
    cuts = [i for i, ch in enumerate(full) if ch == " "] + [len(full)]
    full_tokens = await tokenizer(full)
    if full_tokens <= target_tokens:
        await _refuse_short(tokenizer, full, full_tokens, target_tokens)

    async def fits(i: int) -> tuple[bool, int]:
        tokens = await tokenizer(full[: cuts[i]])
        return tokens <= target_tokens, tokens

    last = len(cuts) - 1  # cut ``last`` (the whole text) does not fit
    guess = min(last - 1, max(0, round(last * target_tokens / full_tokens)))
    ok, tokens = await fits(guess)
    step = max(1, last // 100)
    if ok:  # widen upwards until a cut does not fit
        lo, best, hi = guess, (full[: cuts[guess]], tokens), last
        while lo + step < last:
            ok, tokens = await fits(lo + step)
            if not ok:
                hi = lo + step
                break
            lo, best = lo + step, (full[: cuts[lo + step]], tokens)
            step *= 2
    else:  # widen downwards until a cut fits (or the first cut, the smallest)
        hi = guess
        lo = guess
        while lo > 0:
            lo = max(0, hi - step)
            ok, tokens = await fits(lo)
            if ok:
                break
            hi, step = lo, step * 2
        best = (full[: cuts[lo]], tokens)
    # invariant: cut lo fits (or is the first), cut hi does not; bisect between them
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok, tokens = await fits(mid)
        if ok:
            lo, best = mid, (full[: cuts[mid]], tokens)
        else:
            hi = mid
    return best


WARMUP_MARK = "~warm-up~ "  # opens a warm-up prompt where prefixes may be reused


def warmup_prompt(first: PreparedPrompt, reuse: bool) -> PreparedPrompt:
    """The prompt a warm-up request sends: the first row's, or, where the protocol lets
    a server reuse prefixes (``cache_prompt``), the same text with its opening replaced
    by :data:`WARMUP_MARK`, about as long but sharing no prefix with any row, so no
    measured row finds the warm-up's prompt in the server's cache."""
    if not reuse:
        return first
    text = WARMUP_MARK + first.prompt[len(WARMUP_MARK):]
    return replace(first, prompt=text, sha256=sha256(text))


async def prepare_capacity(
    tokenizer: Tokenizer,
    queries: list[Query],
    capacity: int,
    prompt_fraction: float,
    output_tokens: int,
) -> tuple[int, list[PreparedPrompt]]:
    """Size the padding for ``capacity`` and build one prompt per query.

    Raises ConfigError if a prompt plus the output would not fit the capacity.
    """
    query_tokens = [await tokenizer(q.text) for q in queries]
    # Leave room for the longest query and the separator so the whole prompt lands
    # near the target.
    target = int(prompt_fraction * capacity) - max(query_tokens) - 2
    if target < 1:
        raise ConfigError(f"capacity {capacity} is too small for the queries")
    padding, padding_tokens = await size_padding(tokenizer, target)
    prompts: list[PreparedPrompt] = []
    for query in queries:
        prompt = build_prompt(padding, query)
        tokens = await tokenizer(prompt)
        if tokens + output_tokens > capacity:
            raise ConfigError(
                f"capacity {capacity}: prompt {query.id} has {tokens} tokens, plus "
                f"{output_tokens} output tokens it does not fit; lower prompt_fraction"
            )
        prompts.append(PreparedPrompt(query.id, query.text, prompt, sha256(prompt), tokens))
    return padding_tokens, prompts
