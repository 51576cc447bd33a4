"""What the HTTP APIs need from whatever generates: the one slot or continuous batching.

Both :class:`kvlab.serve.slot.Slot` (requests one at a time) and
:class:`kvlab.serve.batching.BatchingSlot` (many sequences over a paged KV pool) are a
:class:`Generator`: they load the model off the event loop, stream a request's
:class:`TokenEvent` s and one :class:`Finished` (built by :func:`finish`, the one
place a generation's end is computed), and report typed :class:`Gauges` for
``/metrics``. The APIs never ask which one serves them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kvlab.serve.params import GenParams

if TYPE_CHECKING:  # the engine (torch) is imported only where a model is loaded
    from kvlab.engine.phases import Histogram


@dataclass
class Timings:
    """Server-side durations of one generation, in llama.cpp's ``timings`` shape."""

    cache_n: int = 0  # prompt tokens reused from the KV cache
    prompt_n: int = 0  # prompt tokens computed
    prompt_ns: int = 0  # slot start -> first sampled token
    predicted_n: int = 0  # sampled tokens, EOS included
    predicted_ns: int = 0  # first sampled token -> last sampled token

    def to_json(self) -> dict[str, float | int]:
        """llama.cpp's ``timings`` object (ms; per_second excludes the first token)."""
        prompt_ms = self.prompt_ns / 1e6
        predicted_ms = self.predicted_ns / 1e6
        steps = self.predicted_n - 1  # decode steps after the first token
        return {
            "cache_n": self.cache_n,
            "prompt_n": self.prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": prompt_ms / self.prompt_n if self.prompt_n else 0.0,
            "prompt_per_second": 1e3 * self.prompt_n / prompt_ms if prompt_ms > 0 else 0.0,
            "predicted_n": self.predicted_n,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": predicted_ms / steps if steps > 0 else 0.0,
            "predicted_per_second": 1e3 * steps / predicted_ms if steps > 0 else 0.0,
        }


@dataclass(frozen=True)
class TokenEvent:
    """One sampled token and the text it completes ("" mid-character)."""

    token_id: int
    text: str
    made_ns: int = 0  # perf_counter_ns when it was sampled (0: not stamped)


@dataclass
class Finished:
    """The end of a generation: why it stopped and how long it took."""

    n_prompt: int
    tokens: list[int] = field(default_factory=list)  # every sampled token, EOS included
    text: str = ""  # the whole generated text (EOS excluded)
    tail: str = ""  # text not yet streamed: the decoder's flush (a cut character)
    stop_type: str = "limit"  # "eos" or "limit"
    truncated: bool = False  # stopped because the context was full
    tokens_cached: int = 0  # KV cells the slot holds at the end (0 without a cache)
    timings: Timings = field(default_factory=Timings)


def finish(*, n_prompt: int, tokens: list[int], pieces: list[str], tail: str, stop_type: str,
           room: int, tokens_cached: int, cache_n: int, t_start: int, t_first: int | None,
           t_last: int) -> Finished:
    """The Finished of one generation, with llama.cpp's definitions.

    ``pieces``: the text streamed, ``tail`` what the decoder flushed at the end;
    ``room``: tokens that fitted after the prompt (a "limit" stop that used them all is
    a truncation); ``cache_n``: prompt tokens reused. Clock readings (perf_counter ns):
    ``t_start`` when the request's work began (its admission), ``t_first`` and
    ``t_last`` the first and last sampled token (``t_first`` None: no token).
    ``prompt_ns`` runs from the start to the first token (so its time is in it),
    ``predicted_ns`` from the first token to the last, at least 1 µs once decoding
    started (as llama.cpp counts).
    """
    n_out = len(tokens)
    timings = Timings(
        cache_n=cache_n, prompt_n=n_prompt - cache_n,
        prompt_ns=t_first - t_start if t_first is not None else 0,
        predicted_n=n_out,
        predicted_ns=max(t_last - t_first, 1000) if n_out and t_first is not None else 0,
    )
    return Finished(n_prompt=n_prompt, tokens=tokens, text="".join(pieces) + tail, tail=tail,
                    stop_type=stop_type, truncated=stop_type == "limit" and n_out >= room,
                    tokens_cached=tokens_cached, timings=timings)


async def relay(
    queue: asyncio.Queue[TokenEvent | Finished | BaseException],
) -> AsyncIterator[TokenEvent | Finished]:
    """What a worker thread put in ``queue``, up to the Finished; an exception it put
    is raised here, in the request's handler."""
    while True:
        item = await queue.get()
        if isinstance(item, BaseException):
            raise item
        yield item
        if isinstance(item, Finished):
            return


@dataclass(frozen=True)
class PoolGauges:
    """The paged KV pool of continuous batching (``kvlab serve --slots``)."""

    blocks_total: int  # blocks per layer in the pool
    blocks_used: dict[str, int]  # held by sequences, per window group ("full", "512")
    preemptions: int  # sequences preempted to be recomputed, since start
    blocks_cached: dict[str, int] | None = None  # held by nobody, kept for a prefix hit


@dataclass(frozen=True)
class Gauges:
    """What ``/metrics`` reports: requests now, and totals since the server started."""

    running: int  # requests generating now
    waiting: int  # requests waiting for the slot or the batch
    prompt_tokens: int  # prompt tokens computed
    generation_tokens: int  # tokens generated
    finished: int  # requests that finished
    pool: PoolGauges | None = None  # None: the one slot has no blocks
    # prompt tokens looked up in the prefix cache (the one slot's held prefix, or the
    # paged pool's cached blocks), and those found there (None: not counted)
    prefix_cache_queries: int | None = None
    prefix_cache_hits: int | None = None
    steps: StepGauges | None = None  # continuous batching's step clock (None: the slot)


@dataclass(frozen=True)
class StepGauges:
    """Where continuous batching's time goes (:mod:`kvlab.engine.phases`): per phase
    of a step, a histogram of its time per step (``step``: whole steps); per stage of
    a token's way out (``seam``: sampled to taken by its handler on the event loop,
    ``write``: the handler's SSE write), a histogram per token; decode rows sampled;
    and the floor's two terms: bytes of weights a step reads, and the copy bandwidth
    measured at load (bytes/s, 0: not measured)."""

    phases: dict[str, Histogram]
    delivery: dict[str, Histogram]
    rows: int
    weight_bytes: int
    copy_bandwidth: float


class Generator(Protocol):
    """The one slot or continuous batching, as the APIs use them."""

    n_ctx: int  # context capacity per sequence (tokens)
    use_cache: bool  # False: decoding by full recomputation
    eos_ids: tuple[int, ...]
    ready: threading.Event  # set once the model is loaded
    load_error: BaseException | None
    model: Any  # the engine model once loaded (kvlab.engine.lm.LanguageModel)
    tokenizer: Any  # a kvlab.serve.source.ServedTokenizer once loaded
    chat: Any  # its kvlab.serve.chat.ChatTemplate once loaded

    def load(self) -> None:
        """Load the model (blocking; run it off the event loop). Sets ``ready``."""
        ...

    def check_fits(self, prompt_ids: list[int], params: GenParams) -> None:
        """Raise the 400 now, before a stream starts, for a request it can never hold."""
        ...

    def generate(self, prompt_ids: list[int], params: GenParams
                 ) -> AsyncIterator[TokenEvent | Finished]:
        """A TokenEvent per sampled token (EOS excluded), then one Finished. Closing
        the iterator early (client gone) stops the request's generation."""
        ...

    def gauges(self) -> Gauges:
        """Requests running and waiting now, and the totals since start."""
        ...

    def concurrency(self) -> dict[str, Any]:
        """How requests share the engine (the ``kvlab`` part of ``/props``)."""
        ...

    def close(self) -> None:
        """Stop the worker once its current work ends."""
        ...
