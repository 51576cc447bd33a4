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
from typing import Any

from kvlab.serve.generator import Finished, Gauges, Timings, TokenEvent, finish, relay
from kvlab.serve.params import GenParams
from kvlab.serve.prompt_cache import keep_prefix, reusable_prefix
from kvlab.serve.source import ModelSource

__all__ = ["CONCURRENCY", "Finished", "Slot", "Timings", "TokenEvent", "relay"]

CONCURRENCY = "serialized, one slot"


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

    def gauges(self) -> Gauges:
        """Requests running (0 or 1) and waiting for the slot, and totals since start:
        prompt tokens computed, tokens generated, requests finished, prompt tokens
        looked up in the held prefix and found there (cache_prompt)."""
        with self._counts_lock:
            c = dict(self._counts)
        return Gauges(running=c["running"], waiting=c["waiting"],
                      prompt_tokens=c["prompt_tokens"],
                      generation_tokens=c["generation_tokens"], finished=c["finished"],
                      prefix_cache_queries=c["prefix_cache_queries"],
                      prefix_cache_hits=c["prefix_cache_hits"])

    def check_fits(self, prompt_ids: list[int], params: GenParams) -> None:
        """Nothing: a prompt shorter than the context always fits the one slot."""

    def concurrency(self) -> dict[str, Any]:
        """Serialized requests; a prompt may reuse the previous one's cached prefix."""
        return {"concurrency": CONCURRENCY, "prompt_reuse": self.use_cache}

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
        decoder = self.tokenizer.incremental_decoder()
        tokens: list[int] = []
        pieces: list[str] = []
        stop_type, cache_n = "limit", 0
        t_start = time.perf_counter_ns()
        t_first: int | None = None
        t_last = t_start
        if limit > 0:
            stream, cache_n = self._token_stream(prompt_ids, limit, params)
            for token_id in stream:
                t_last = time.perf_counter_ns()
                if t_first is None:
                    t_first = t_last
                tokens.append(token_id)
                if token_id in self.eos_ids and not params.ignore_eos:
                    stop_type = "eos"
                    break
                text = decoder.push(token_id)
                pieces.append(text)
                put(TokenEvent(token_id, text))
                if cancel.is_set():
                    break
        if self.cache is not None and limit > 0:  # the last token is never fed back
            self._held = (prompt_ids + tokens)[: self.cache.length]
        return finish(n_prompt=n_prompt, tokens=tokens, pieces=pieces, tail=decoder.flush(),
                      stop_type=stop_type, room=room, tokens_cached=len(self._held),
                      cache_n=cache_n, t_start=t_start, t_first=t_first, t_last=t_last)
