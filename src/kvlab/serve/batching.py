"""Continuous batching behind the server: the scheduler on one worker thread.

A :class:`~kvlab.serve.generator.Generator`, as the one-request
:class:`kvlab.serve.slot.Slot` is, so the APIs do not know which one serves them. Requests go
into an inbox; one worker thread moves them into the
:class:`kvlab.engine.scheduler.Scheduler` and steps it while work is left, so many
sequences decode in each batched forward over the paged KV cache
(:mod:`kvlab.engine.paged`). Sampled tokens come back to the event loop through one
asyncio queue per request.

Timings keep llama.cpp's definitions per request: ``prompt_ms`` runs from the
request's admission into the running batch (waiting in the queue is not counted) to
its first token, ``predicted_ms`` from its first token to its last. A client that goes
away marks its request cancelled; the worker returns its blocks at the next step.

Prefix caching (on unless ``--no-prefix-cache``): a request starts from the cached
blocks of its longest known prefix unless it sends ``cache_prompt: false`` (kvlab's
harness always does, unless an experiment asks for reuse), and reports the prompt
tokens it found as ``timings.cache_n`` and ``usage.prompt_tokens_details
.cached_tokens``; ``/metrics`` counts the tokens looked up and found
(``prefix_cache_queries``, ``prefix_cache_hits``, vLLM's names).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from kvlab.serve.api_errors import invalid_request
from kvlab.serve.generator import (
    Finished,
    Gauges,
    PoolGauges,
    StepGauges,
    TokenEvent,
    finish,
    relay,
)
from kvlab.serve.params import GenParams
from kvlab.serve.source import ModelSource

FLOOR_MIN_BYTES = 64 * 2**20  # weights below this (toy models) measure no copy bandwidth


@dataclass(frozen=True)
class BatchSettings:
    """The scheduler's limits: sequences in flight, KV blocks, prefill tokens per step;
    and whether full blocks are cached for later prompts."""

    max_running: int = 16
    n_blocks: int = 1024
    block_size: int = 16
    token_budget: int = 256
    prefix_caching: bool = True


@dataclass
class _Job:
    """The bridge between one scheduler request and its HTTP handler."""

    params: GenParams
    room: int  # tokens that still fit in the context after the prompt
    put: Any  # thread-safe put into the handler's asyncio queue
    decoder: Any
    eos_ids: tuple[int, ...]
    request: Any = None  # the scheduler's Request
    pieces: list[str] = field(default_factory=list)
    t_first: int = 0
    t_last: int = 0

    def on_token(self, token_id: int) -> None:
        """Called on the worker thread for each sampled token."""
        self.t_last = time.perf_counter_ns()
        if not self.t_first:
            self.t_first = self.t_last
        if token_id in self.eos_ids and not self.params.ignore_eos:
            return  # the stop token is counted, not streamed
        text = self.decoder.push(token_id)
        self.pieces.append(text)
        self.put(TokenEvent(token_id, text, self.t_last))

    def finished(self) -> Finished:
        """The request's Finished record, once the scheduler ended it."""
        req = self.request
        return finish(
            n_prompt=len(req.prompt), tokens=list(req.tokens), pieces=self.pieces,
            tail=self.decoder.flush(), stop_type="eos" if req.stop_type == "eos" else "limit",
            room=self.room, tokens_cached=len(req.prompt) + max(len(req.tokens) - 1, 0),
            cache_n=max(req.prompt_hit, 0), t_start=req.admitted_ns,
            t_first=self.t_first or None,
            t_last=self.t_last)


class BatchingSlot:
    """Many sequences at once: a paged KV pool and a continuous-batching scheduler."""

    def __init__(self, source: ModelSource, n_ctx: int, threads: int,
                 batch: BatchSettings) -> None:
        self.source = source
        self.n_ctx = n_ctx
        self.threads = threads
        self.batch = batch
        self.use_cache = True
        self.model: Any = None
        self.tokenizer: Any = None
        self.chat: Any = None
        self.eos_ids: tuple[int, ...] = tuple(source.config.eos_ids)
        self.scheduler: Any = None
        self.ready = threading.Event()
        self.load_error: BaseException | None = None
        self._inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        # what the worker hands to handlers, sent to their loop in one call per step
        self._outbox: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[Any], Any]] = []
        self.delivery: Any = None  # kvlab.engine.phases.Histograms of a token's way out
        self.weight_bytes = 0  # what a decode step reads of the weights
        self.copy_bandwidth = 0.0  # bytes/s, measured at load

    def load(self) -> None:
        """Load the model, allocate the pool, start the worker. Sets ``ready``."""
        import torch

        from kvlab.engine.paged import BlockPool
        from kvlab.engine.phases import Histograms
        from kvlab.engine.scheduler import Scheduler
        from kvlab.engine.weights import copy_bandwidth, weight_nbytes

        torch.set_num_threads(self.threads)
        served = self.source.load()
        self.model, self.tokenizer, self.chat = served.model, served.tokenizer, served.chat
        self.delivery = Histograms()
        self.weight_bytes = weight_nbytes(self.model)
        if self.weight_bytes >= FLOOR_MIN_BYTES:  # a toy's floor would say nothing
            self.copy_bandwidth = copy_bandwidth()  # the floor: weight_bytes / this
        pool = BlockPool(self.model.config, self.batch.n_blocks, self.batch.block_size,
                         prefix_caching=self.batch.prefix_caching)
        # The scheduler allocates the pool's K/V tensors in the model's dtype.
        self.scheduler = Scheduler(self.model, pool, self.batch.max_running,
                                   self.batch.token_budget)
        self._worker = threading.Thread(target=self._loop, name="kvlab-batch", daemon=True)
        self._worker.start()
        self.ready.set()

    def limit(self, n_prompt: int, params: GenParams) -> int:
        """Tokens this request may generate: n_predict, within the context."""
        room = self.n_ctx - n_prompt
        return room if params.n_predict < 0 else min(params.n_predict, room)

    def check_fits(self, prompt_ids: list[int], params: GenParams) -> None:
        """400 before any work when the request could never fit the KV pool."""
        from kvlab.engine.scheduler import RequestTooLarge

        try:
            self.scheduler.check_fits(len(prompt_ids), self.limit(len(prompt_ids), params))
        except RequestTooLarge as exc:
            raise invalid_request(str(exc)) from None

    async def generate(
        self, prompt_ids: list[int], params: GenParams
    ) -> AsyncIterator[TokenEvent | Finished]:
        """Yield a TokenEvent per sampled token (EOS excluded), then one Finished."""
        from kvlab.engine.generate import make_sampler
        from kvlab.engine.scheduler import Request

        loop = asyncio.get_running_loop()
        events: asyncio.Queue[TokenEvent | Finished | BaseException] = asyncio.Queue()

        def put(item: TokenEvent | Finished | BaseException) -> None:
            self._outbox.append((loop, events, item))  # on the worker; sent once a step

        limit = self.limit(len(prompt_ids), params)
        job = _Job(params, self.n_ctx - len(prompt_ids), put,
                   self.tokenizer.incremental_decoder(), self.eos_ids)
        job.request = Request(
            prompt=list(prompt_ids), max_new_tokens=limit,
            sample=make_sampler(params.temperature, params.seed),
            stop_ids=() if params.ignore_eos else self.eos_ids, on_token=job.on_token,
            cache_prompt=params.cache_prompt)
        self._inbox.put(job)
        try:
            async for item in relay(events):
                if not isinstance(item, TokenEvent):
                    yield item
                    continue
                taken = time.perf_counter_ns()
                self.delivery.observe("seam", (taken - item.made_ns) / 1e9)
                yield item  # resumed once the handler wrote it and wants the next
                self.delivery.observe("write", (time.perf_counter_ns() - taken) / 1e9)
        finally:
            job.request.cancelled = True  # a no-op once it ended

    def close(self) -> None:
        """Stop the worker after its current step."""
        self._inbox.put(None)

    def gauges(self) -> Gauges:
        """Running and waiting requests, KV blocks per window group, and counters
        (all zero before the model is loaded; prefix-cache counters only when it is on)."""
        if self.scheduler is None:
            return Gauges(running=0, waiting=self._inbox.qsize(), prompt_tokens=0,
                          generation_tokens=0, finished=0)
        stats = self.scheduler.stats()
        counters, caching = stats.counters, stats.blocks_cached is not None

        def by_name(blocks: dict[int | None, int]) -> dict[str, int]:
            return {("full" if w is None else str(w)): n for w, n in blocks.items()}

        return Gauges(
            running=stats.running,
            waiting=stats.waiting + self._inbox.qsize(),
            prompt_tokens=counters.prompt_tokens,
            generation_tokens=counters.generation_tokens,
            finished=counters.finished,
            pool=PoolGauges(
                blocks_total=stats.blocks_total,
                blocks_used=by_name(stats.blocks_used),
                preemptions=counters.preemptions,
                blocks_cached=by_name(stats.blocks_cached)
                if stats.blocks_cached is not None else None),
            prefix_cache_queries=counters.prefix_queries if caching else None,
            prefix_cache_hits=counters.prefix_hits if caching else None,
            steps=StepGauges(
                phases=self.scheduler.clock.snapshot(), delivery=self.delivery.snapshot(),
                rows=self.scheduler.clock.rows, weight_bytes=self.weight_bytes,
                copy_bandwidth=self.copy_bandwidth),
        )

    def concurrency(self) -> dict[str, Any]:
        """Continuous batching over a paged KV pool; prompt reuse by prefix caching
        (full blocks), unless turned off."""
        batch = self.batch
        return {
            "concurrency": f"continuous batching, up to {batch.max_running} sequences",
            "prompt_reuse": batch.prefix_caching,
            "paged_kv": {"blocks": batch.n_blocks, "block_size": batch.block_size,
                         "prefill_budget": batch.token_budget,
                         "prefix_caching": batch.prefix_caching},
        }

    def _loop(self) -> None:
        """The worker: take new jobs, step the scheduler, hand out what ended."""
        jobs: dict[int, _Job] = {}
        while True:
            self._send()
            block = self.scheduler.idle
            try:
                while True:
                    job = self._inbox.get(block=block)
                    block = False
                    if job is None:
                        return
                    self._admit(job, jobs)
            except queue.Empty:
                pass
            self._send()
            try:
                ended = self.scheduler.step()
            except Exception as exc:  # every request in flight fails with it
                self._fail_all(jobs, exc)
                continue
            for req in ended:
                job = jobs.pop(req.id)
                if req.stop_type != "cancelled":
                    job.put(job.finished())

    def _send(self) -> None:
        """Hand what the worker posted to the handlers: one wake-up of each event loop
        per step, not one per token (16 streams: 16 self-pipe writes and loop turns
        become one)."""
        if not self._outbox:
            return
        posted, self._outbox = self._outbox, []
        for loop in {id(lp): lp for lp, _, _ in posted}.values():
            items = [(q, item) for lp, q, item in posted if lp is loop]
            loop.call_soon_threadsafe(_deliver, items)

    def _admit(self, job: _Job, jobs: dict[int, _Job]) -> None:
        if job.request.cancelled:
            return
        try:
            self.scheduler.submit(job.request)
        except Exception as exc:  # refused (too large, bad ids): the handler raises it
            job.put(exc)
            return
        if job.request.done:  # nothing to generate
            job.put(job.finished())
            return
        jobs[job.request.id] = job

    def _fail_all(self, jobs: dict[int, _Job], exc: Exception) -> None:
        """A step failed: every request in flight ends with ``exc``, the pool is emptied."""
        self.scheduler.abort_all()
        for job in jobs.values():
            job.put(exc)
        jobs.clear()


def _deliver(items: list[tuple[asyncio.Queue[Any], Any]]) -> None:
    """On the event loop: put each item in its handler's queue, in order."""
    for events, item in items:
        events.put_nowait(item)
