"""Generation: naive (recompute everything each step) or cached (prefill, then one token).

One loop for every architecture (:class:`kvlab.engine.lm.LanguageModel`): the toy and
Gemma 3 differ in their layers and caches' windows, not in how tokens are chosen.

Both paths share the sampler, so on the same weights and seed they choose the same
tokens; only the reused work differs. The last chosen token is never fed back, so a
cached generation of N tokens leaves prompt + N - 1 tokens in the cache.

:func:`iter_generate` streams token ids as they are chosen (the embedded server's
entry point); :func:`generate` collects them, with the per-step logits if asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from kvlab.engine.cache import KVCache
from kvlab.engine.lm import LanguageModel, new_cache
from kvlab.errors import CacheOverflowError, EngineError, PromptTooLongError

Sampler = Callable[[torch.Tensor], int]


GREEDY_BLOCK = 1024  # logits per block of the two-level argmax


def greedy_tokens(logits: torch.Tensor) -> list[int]:
    """The argmax of each row of ``logits`` (K, V), the first index among ties (as
    ``torch.argmax``). Two levels: the maximum of every block of 1,024 logits (a
    vectorized reduction), then the first block holding the row's maximum, searched
    alone. torch's argmax over 262,144 bfloat16 logits is a scalar loop (about 1 ms a
    row on one core); this reads them once at the speed of ``amax``."""
    K, V = logits.shape
    if V % GREEDY_BLOCK or V < 2 * GREEDY_BLOCK:
        return logits.max(dim=-1).indices.tolist()
    blocks = logits.view(K, V // GREEDY_BLOCK, GREEDY_BLOCK)  # (K, B, 1024)
    first = blocks.amax(dim=-1).max(dim=-1).indices  # (K,) first block with the maximum
    inside = blocks[torch.arange(K), first].max(dim=-1).indices  # (K,) first in it
    return (first * GREEDY_BLOCK + inside).tolist()


class Greedy:
    """The temperature-0 sampler: the argmax (:func:`greedy_tokens`). The scheduler
    picks the tokens of every greedy row of a step in one call."""

    def __call__(self, logits: torch.Tensor) -> int:
        return greedy_tokens(logits.reshape(1, -1))[0]


def make_sampler(temperature: float, seed: int | None) -> Sampler:
    """Greedy argmax when temperature is 0; otherwise sampling from softmax(logits/T)
    with a private generator seeded from ``seed`` (None: a fresh random seed)."""
    if temperature < 0:
        raise EngineError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return Greedy()
    gen = torch.Generator()
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(seed)

    def sample(logits: torch.Tensor) -> int:
        probs = torch.softmax(logits.float() / temperature, dim=-1)
        return int(torch.multinomial(probs, 1, generator=gen))

    return sample


def check_request(
    model: LanguageModel, prompt_ids: list[int], max_new_tokens: int, cache: KVCache | None = None
) -> None:
    """Refuse a request the model cannot serve, before any work is done."""
    vocab = model.config.vocab_size
    if not prompt_ids:
        raise EngineError("the prompt is empty; give at least one token")
    if max_new_tokens < 0:
        raise EngineError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if any(not 0 <= t < vocab for t in prompt_ids):
        raise EngineError(f"prompt token ids must lie in 0..{vocab - 1}")
    needed = len(prompt_ids) + max(max_new_tokens - 1, 0)
    if needed > model.config.max_len:
        raise PromptTooLongError(
            f"prompt of {len(prompt_ids)} tokens + {max_new_tokens} new tokens needs "
            f"{needed} positions (prompt + new - 1) but the model's max_len is "
            f"{model.config.max_len}; shorten the prompt or ask for fewer tokens"
        )
    if cache is not None and needed > cache.max_len:
        raise CacheOverflowError(
            f"the request needs {needed} cache slots but the given cache holds "
            f"{cache.max_len}; allocate a larger KVCache or shorten the request"
        )


def _cached_steps(
    model: LanguageModel,
    prompt_ids: list[int],
    max_new_tokens: int,
    sample: Sampler,
    cache: KVCache,
    prefill_chunk: int | None,
    logits_out: list[torch.Tensor] | None,
    reuse: int = 0,
) -> Iterator[int]:
    # inference_mode is entered per step, never held across a yield: the caller's
    # code between two tokens must run in its own autograd mode.
    # ``reuse``: the cache already holds prompt_ids[:reuse]; keep it, compute the rest.
    cache.truncate(reuse)
    n = len(prompt_ids)
    chunk = n - reuse if prefill_chunk is None else prefill_chunk
    with torch.inference_mode():
        ids = torch.tensor([prompt_ids], dtype=torch.long)  # (1, n)
        for start in range(reuse, n, chunk):
            part = ids[:, start:start + chunk]  # (1, <= chunk)
            logits = model(part, cache, start_pos=cache.length, last_only=True)
            cache.advance(part.shape[1])
        last = logits[0, -1]  # (vocab,)
        step_ids = torch.zeros((1, 1), dtype=torch.long)  # reused for every decode step
    for step in range(max_new_tokens):
        with torch.inference_mode():
            token = sample(last)
        if logits_out is not None:
            logits_out.append(last)
        yield token
        if step + 1 == max_new_tokens:
            return
        with torch.inference_mode():
            step_ids[0, 0] = token
            last = model(step_ids, cache, start_pos=cache.length)[0, -1]  # (vocab,)
            cache.advance(1)


def _naive_steps(
    model: LanguageModel,
    prompt_ids: list[int],
    max_new_tokens: int,
    sample: Sampler,
    logits_out: list[torch.Tensor] | None,
) -> Iterator[int]:
    n = len(prompt_ids)
    with torch.inference_mode():
        seq = torch.zeros((1, n + max_new_tokens), dtype=torch.long)  # (1, n + new)
        seq[0, :n] = torch.tensor(prompt_ids, dtype=torch.long)
    for _ in range(max_new_tokens):
        with torch.inference_mode():
            last = model(seq[:, :n], last_only=True)[0, -1]  # whole sequence again; (vocab,)
            token = sample(last)
        if logits_out is not None:
            logits_out.append(last)
        yield token
        with torch.inference_mode():
            seq[0, n] = token
        n += 1


def _stop_at_eos(tokens: Iterator[int], eos_ids: tuple[int, ...]) -> Iterator[int]:
    for token in tokens:
        if token in eos_ids:
            return
        yield token


def _steps(
    model: LanguageModel,
    prompt_ids: list[int],
    max_new_tokens: int,
    *,
    use_cache: bool,
    temperature: float,
    seed: int | None,
    ignore_eos: bool,
    cache: KVCache | None,
    prefill_chunk: int | None = None,
    logits_out: list[torch.Tensor] | None = None,
    reuse_prefix: int = 0,
) -> Iterator[int]:
    """Validate now, then return the lazy token stream."""
    check_request(model, prompt_ids, max_new_tokens, cache)
    if prefill_chunk is not None and prefill_chunk <= 0:
        raise EngineError(f"prefill_chunk must be positive, got {prefill_chunk}")
    if reuse_prefix and (not use_cache or cache is None
                         or not 0 < reuse_prefix < len(prompt_ids)
                         or reuse_prefix > cache.length):
        raise EngineError(
            f"reuse_prefix {reuse_prefix} needs use_cache, a cache holding at least that "
            f"many tokens, and a longer prompt ({len(prompt_ids)} tokens): at least one "
            "prompt token is always computed"
        )
    sample = make_sampler(temperature, seed)
    if max_new_tokens == 0:
        return iter(())
    if use_cache:
        if cache is None:
            cache = new_cache(model, len(prompt_ids) + max_new_tokens - 1)
        tokens = _cached_steps(
            model, prompt_ids, max_new_tokens, sample, cache, prefill_chunk, logits_out,
            reuse_prefix,
        )
    else:
        tokens = _naive_steps(model, prompt_ids, max_new_tokens, sample, logits_out)
    return tokens if ignore_eos else _stop_at_eos(tokens, model.config.eos_ids)


def iter_generate(
    model: LanguageModel,
    prompt_ids: list[int],
    max_new_tokens: int,
    *,
    use_cache: bool = True,
    temperature: float = 0.0,
    seed: int | None = 42,
    ignore_eos: bool = True,
    cache: KVCache | None = None,
    reuse_prefix: int = 0,
) -> Iterator[int]:
    """Yield each new token id as soon as it is chosen.

    The time to the first yield is the prompt processing (one prefill pass with the
    cache; the first full pass without). With ``ignore_eos`` False, generation stops at
    one of ``model.config.eos_ids``, which is not yielded: fewer than
    ``max_new_tokens`` ids means EOS.
    ``cache``: a preallocated cache to reuse (it is reset first); None allocates one
    sized to the request. ``reuse_prefix``: ``cache`` already holds the K/V of
    ``prompt_ids[:reuse_prefix]`` (prompt reuse, as llama.cpp's ``cache_prompt``); those
    cells are kept and only the rest of the prompt is computed (at least one token).
    Bad requests raise here, before the first ``next()``.
    """
    return _steps(
        model, prompt_ids, max_new_tokens, use_cache=use_cache, temperature=temperature,
        seed=seed, ignore_eos=ignore_eos, cache=cache, reuse_prefix=reuse_prefix,
    )


@dataclass
class Generation:
    """A finished generation: the new token ids and, if kept, each step's logits."""

    tokens: list[int]
    logits: torch.Tensor | None  # (steps, vocab): the logits each token was chosen from
    cache: KVCache | None  # the cache the cached path filled; None for naive


def generate(
    model: LanguageModel,
    prompt_ids: list[int],
    max_new_tokens: int,
    *,
    use_cache: bool = True,
    temperature: float = 0.0,
    seed: int | None = 42,
    ignore_eos: bool = True,
    cache: KVCache | None = None,
    prefill_chunk: int | None = None,
    keep_logits: bool = False,
) -> Generation:
    """Run a whole generation. ``prefill_chunk`` splits the prompt into cached passes of
    that many tokens (exercising the offset mask); None prefills in one pass."""
    if use_cache and cache is None:
        check_request(model, prompt_ids, max_new_tokens)
        cache = new_cache(model, len(prompt_ids) + max(max_new_tokens - 1, 0))
    logits_out: list[torch.Tensor] | None = [] if keep_logits else None
    tokens = list(_steps(
        model, prompt_ids, max_new_tokens, use_cache=use_cache, temperature=temperature,
        seed=seed, ignore_eos=ignore_eos, cache=cache, prefill_chunk=prefill_chunk,
        logits_out=logits_out,
    ))
    stacked = torch.stack(logits_out) if logits_out else None
    return Generation(tokens=tokens, logits=stacked, cache=cache if use_cache else None)
