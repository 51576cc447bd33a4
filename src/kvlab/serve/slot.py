"""The single generation slot: the model, a worker thread, and server-side timings.

Requests are serialized, one slot: every generation runs on one dedicated worker
thread (torch work never blocks the event loop, so ``/health`` stays responsive) and
its tokens come back to the event loop through an asyncio queue as they are sampled.
A request waiting for the slot is not timed; its clock starts when the worker picks
it up (llama.cpp does not count queueing either).

Timings follow llama.cpp's definitions (``perf_counter_ns`` inside the server):
``prompt_ms`` runs from the slot start to the first sampled token (so the first
token's time is in it), ``predicted_ms`` from the first sampled token to the last.

With the KV cache on and ``cache_prompt`` true (the default, as in llama.cpp), a
prompt that shares a prefix with the tokens the slot's cache holds from the previous
request reuses those cells (``timings.cache_n``); see :mod:`kvlab.serve.prompt_cache`.
``cache_prompt`` false, or ``--no-cache``, recomputes the whole prompt.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kvlab.serve.params import GenParams
from kvlab.serve.prompt_cache import keep_prefix, reusable_prefix
from kvlab.serve.source import ModelSource


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


class Slot:
    """One model, one worker thread; :meth:`generate` streams one request at a time.

    ``source``: the model to load (:mod:`kvlab.serve.source`). ``n_ctx`` is the context
    capacity in tokens: prompt plus generated tokens never exceed it. ``use_cache``
    False decodes by full recomputation at every step. A generation stops at any of
    the model's ``eos_ids`` (Gemma 3: ``<eos>`` and ``<end_of_turn>``).
    """

    def __init__(self, source: ModelSource, n_ctx: int, use_cache: bool, threads: int
                 ) -> None:
        self.source = source
        self.n_ctx = n_ctx
        self.use_cache = use_cache
        self.threads = threads
        self.model: Any = None
        self.tokenizer: Any = None  # a ServedTokenizer once loaded
        self.chat: Any = None  # the ChatTemplate once loaded
        self.eos_ids: tuple[int, ...] = tuple(source.config.eos_ids)
        self.cache: Any = None  # the preallocated KV cache (None with use_cache False)
        self._held: list[int] = []  # token ids whose K/V the cache holds, in order
        self.ready = threading.Event()
        self.load_error: BaseException | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvlab-slot")
        self._counts = {"waiting": 0, "running": 0, "prompt_tokens": 0,
                        "generation_tokens": 0, "finished": 0, "prefix_cache_queries": 0,
                        "prefix_cache_hits": 0}  # see gauges()
        self._counts_lock = threading.Lock()

    def load(self) -> None:
        """Load the model (blocking; run it off the event loop). Sets ``ready``."""
        import torch

        from kvlab.engine.lm import new_cache

        torch.set_num_threads(self.threads)
        served = self.source.load()
        self.model, self.tokenizer, self.chat = served.model, served.tokenizer, served.chat
        # One preallocated cache of the whole context, reused by every request.
        self.cache = new_cache(self.model, self.n_ctx) if self.use_cache else None
        self.ready.set()

    def _token_stream(
        self, prompt_ids: list[int], limit: int, params: GenParams
    ) -> tuple[Iterator[int], int]:
        """The token iterator for one request and the prompt tokens it reuses."""
        from kvlab.engine import iter_generate

        reuse = 0
        if self.cache is not None:
            if params.cache_prompt:
                reuse = reusable_prefix(self._held, prompt_ids)
            reuse = keep_prefix(self.cache, reuse)
        self._held = []  # unknown until this request ends well
        # The engine never sees ignore_eos=False: stopping in _run instead lets EOS be
        # counted in tokens_predicted, as llama.cpp counts it.
        tokens = iter_generate(
            self.model, prompt_ids, limit, use_cache=self.use_cache,
            temperature=params.temperature, seed=params.seed, ignore_eos=True,
            cache=self.cache, reuse_prefix=reuse,
        )
        return tokens, reuse

    def _count(self, **deltas: int) -> None:
        with self._counts_lock:
            for key, delta in deltas.items():
                self._counts[key] += delta

    def gauges(self) -> dict[str, int]:
        """Requests running (0 or 1) and waiting for the slot, and totals since start:
        prompt tokens computed, tokens generated, requests finished, prompt tokens
        looked up in the held prefix and found there (cache_prompt)."""
        with self._counts_lock:
            return dict(self._counts)

    def close(self) -> None:
        """Stop the worker thread once the running generation (if any) ends."""
        self._worker.shutdown(wait=False, cancel_futures=True)

    async def generate(
        self, prompt_ids: list[int], params: GenParams
    ) -> AsyncIterator[TokenEvent | Finished]:
        """Yield a TokenEvent per sampled token (EOS excluded), then one Finished.

        The caller checks ``len(prompt_ids) < n_ctx`` first. Closing the iterator early
        (client gone) stops the generation at its next token.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[TokenEvent | Finished | BaseException] = asyncio.Queue()
        cancel = threading.Event()

        def put(item: TokenEvent | Finished | BaseException) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            self._count(waiting=-1, running=1)
            try:
                done = self._run(prompt_ids, params, put, cancel)
                self._count(prompt_tokens=done.timings.prompt_n,
                            generation_tokens=len(done.tokens), finished=1,
                            prefix_cache_queries=done.n_prompt,
                            prefix_cache_hits=done.timings.cache_n)
                put(done)
            except BaseException as exc:  # handed to the request, which answers 500
                put(exc)
            finally:
                self._count(running=-1)

        self._count(waiting=1)
        self._worker.submit(work)
        try:
            async for item in relay(queue):
                yield item
        finally:
            cancel.set()

    def _run(self, prompt_ids: list[int], params: GenParams, put: Any,
             cancel: threading.Event) -> Finished:
        """The generation itself, on the worker thread."""
        n_prompt = len(prompt_ids)
        room = self.n_ctx - n_prompt  # tokens that still fit in the context
        limit = room if params.n_predict < 0 else min(params.n_predict, room)
        done = Finished(n_prompt=n_prompt)
        decoder = self.tokenizer.incremental_decoder()
        pieces: list[str] = []
        t_start = time.perf_counter_ns()
        t_first = t_last = t_start
        if limit > 0:
            tokens, done.timings.cache_n = self._token_stream(prompt_ids, limit, params)
            for token_id in tokens:
                t_last = time.perf_counter_ns()
                if not done.tokens:
                    t_first = t_last
                done.tokens.append(token_id)
                if token_id in self.eos_ids and not params.ignore_eos:
                    done.stop_type = "eos"
                    break
                text = decoder.push(token_id)
                pieces.append(text)
                put(TokenEvent(token_id, text))
                if cancel.is_set():
                    break
        done.tail = decoder.flush()
        pieces.append(done.tail)
        n_out = len(done.tokens)
        done.text = "".join(pieces)
        done.truncated = done.stop_type == "limit" and n_out >= room
        if self.cache is not None and limit > 0:  # the last token is never fed back
            self._held = (prompt_ids + done.tokens)[: self.cache.length]
        done.tokens_cached = len(self._held)
        done.timings.prompt_n = n_prompt - done.timings.cache_n
        done.timings.prompt_ns = t_first - t_start
        done.timings.predicted_n = n_out
        # llama.cpp counts at least 1 µs once decoding started.
        done.timings.predicted_ns = max(t_last - t_first, 1000) if n_out else 0
        return done
