"""Texts of an exact token count: a head of the row's own, then filler cut to fit.

Kinds that ask for a prompt length (``random``, ``trace``, shared prefixes) build each
prompt as ``head + filler[:cut]``, counted by the run's token counter
(:mod:`kvlab.bench.plan.sizing`: the server's ``/tokenize``, a tokenizer file, or
calibration on its ``usage``). :func:`fit_tokens` finds the cut in three steps:

1. the longest word-aligned cut within the target, by the padding's bracketing
   bisection (:func:`~kvlab.bench.plan.workload.size_padding`, about 10 counts);
2. if that falls short, a cut inside the next word, character by character;
3. if a tokenizer still skips the target (the next character adds two tokens), short
   pieces (``" ."``, ``"."``, ``" a"``, ...) appended one at a time.

The count is of the whole text, so the result is exact by the counter's own measure;
when no step reaches the target, :class:`~kvlab.errors.ConfigError` names the row.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.bench.plan.workload import Tokenizer, padding_text, size_padding
from kvlab.errors import ConfigError

# Appended one at a time when a cut cannot land on the target; each is one token in
# most tokenizers, two at most.
FILL_PIECES: tuple[str, ...] = (" .", ".", " a", "a", "\n", " ")
_MAX_FILL = 64  # pieces tried before giving up
_MAX_CHARS = 64_000_000  # filler longer than this is refused (a target past ~10M tokens)


@dataclass(frozen=True)
class Sized:
    """A text and its token count by the run's counter."""

    text: str
    tokens: int


async def fit_tokens(counter: Tokenizer, head: str, target: int, what: str,
                     filler: str | None = None) -> Sized:
    """``head`` followed by a prefix of ``filler`` (default: kvlab's padding text), of
    exactly ``target`` tokens; ``what`` names the row in an error."""
    base = await counter(head)
    if base > target:
        raise ConfigError(f"{what}: its own text counts {base} tokens, over the {target} "
                          "it asks for")
    if base == target:
        return Sized(head, base)
    own = filler is None
    filler = padding_text() if filler is None else filler
    while (whole := await counter(head + filler)) <= target:
        if whole == target:
            return Sized(head + filler, whole)
        if len(filler) > _MAX_CHARS:
            raise ConfigError(f"{what}: cannot build a prompt of {target} tokens")
        filler = padding_text(2 * len(filler)) if own else filler + " " + filler

    async def count(text: str) -> int:
        return await counter(head + text)

    cut, tokens = await size_padding(count, target, full=filler)
    if tokens == target:
        return Sized(head + cut, tokens)
    best = Sized(head + cut, tokens) if tokens < target else Sized(head, base)
    start = len(best.text) - len(head)
    end = filler.find(" ", start + 1)
    for j in range(start + 1, len(filler) + 1 if end < 0 else end + 1):
        tokens = await count(filler[:j])
        if tokens == target:
            return Sized(head + filler[:j], tokens)
        if tokens > target:
            break
        best = Sized(head + filler[:j], tokens)
    return await _fill(counter, best, target, what)


async def _fill(counter: Tokenizer, best: Sized, target: int, what: str) -> Sized:
    """``best`` grown by short pieces to ``target`` tokens, or ConfigError."""
    for _ in range(_MAX_FILL):
        for piece in FILL_PIECES:
            tokens = await counter(best.text + piece)
            if tokens == target:
                return Sized(best.text + piece, tokens)
            if tokens < target:
                best = Sized(best.text + piece, tokens)
                break
        else:
            break
    raise ConfigError(f"{what}: this tokenizer cannot make a prompt of exactly {target} "
                      f"tokens from kvlab's text (closest: {best.tokens}); ask for another "
                      "length")


def row_tag(index: int) -> str:
    """A short tag that starts a row's text: ``index`` in base 62, lowest digit first, so
    the tags of rows 0..61 differ from their first character (and those of any two rows
    whose indices differ mod 62). ``index`` >= 0."""
    if index < 0:
        raise ValueError(f"a row tag needs an index >= 0, got {index}")
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    out = digits[index % 62]
    index //= 62
    while index:
        out += digits[index % 62]
        index //= 62
    return out
