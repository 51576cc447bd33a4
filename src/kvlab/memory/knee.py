"""The concurrency knee: the most sequences a server's KV budget holds at once, and
what the server does with one more.

A closed loop of N clients, each sending a prompt of P tokens and reading O output
tokens, keeps N sequences in flight. A sequence's KV reaches L = P + O - 1 tokens
(the last sampled token is never fed back). N sequences at their longest must fit
the budget; the knee is the largest N that does, and ``first_past`` = knee + 1 is
where the server must queue, preempt or fail. Each server counts its budget its own
way (sources: docs/concepts/kv-knee.md):

- **vLLM** (``vllm/v1/core``): blocks of ``block`` tokens from one pool shared by
  every block group (:mod:`kvlab.memory.vllm_blocks`), less the null block. A sliding
  group frees the blocks that left the window before each step's allocation
  (``SlidingWindowManager.remove_skipped_blocks``). A request is admitted when its
  whole prompt's blocks are free (``scheduler_reserve_full_isl``, watermark 0), then
  grows during decode; a running request that cannot grow preempts the newest
  (``Scheduler.schedule``). ``max_num_seqs`` caps the running set.
- **kvlab serve** (:mod:`kvlab.engine.paged`, :mod:`kvlab.engine.scheduler`): each
  window group has its own pool of ``kv_blocks`` blocks; a sliding group frees what
  left the window after each step. A request is admitted when its first prompt chunk
  fits (``Scheduler._schedule``), then grows; a sequence that cannot grow preempts the
  youngest. ``--slots`` caps the running set.
- **llama-server** (:mod:`kvlab.memory.llamacpp`): ``-np`` slots. Not unified (kvlab's
  launch), each slot owns ``n_ctx_seq`` cells, so N slots run and request N + 1 waits
  for a slot. Unified (``-kvu``), the slots share ``n_ctx`` cells; when they run out
  the server halves its batch and then fails every active request ("Context size has
  been exceeded"). Sliding-window layers have their own cache sized
  ``n_swa x (unified ? np : 1) + ubatch``: it never binds before the global one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from kvlab.errors import ConfigError
from kvlab.memory.dtypes import get_dtype, row_bytes
from kvlab.memory.formula import check_positive
from kvlab.memory.llamacpp import predict_llamacpp_kv
from kvlab.memory.shapes import ModelShape
from kvlab.memory.vllm_blocks import BlockGroup, vllm_block_bytes, vllm_groups

# vLLM-CPU's defaults for an API server (vllm/engine/arg_utils.py,
# EngineArgs._get_default_max_num_batched_tokens_and_max_num_seqs; GPUs differ).
VLLM_CPU_MAX_NUM_SEQS = 128
VLLM_CPU_MAX_BATCHED_TOKENS = 2048
VLLM_CPU_BLOCK_SIZE = 128  # vllm/platforms/cpu.py, check_and_update_config


class Past(StrEnum):
    """What a server does with one sequence more than its knee, all arriving at once."""

    PREEMPT = "preempt"  # all admitted; a running sequence is evicted and recomputed
    QUEUE = "queue"  # the extra request waits (num_requests_waiting, requests_deferred)
    ERROR = "error"  # requests fail (llama-server's unified cache)


class Bound(StrEnum):
    """What sets the knee."""

    KV = "kv"  # the KV budget
    SLOTS = "slots"  # the server's cap on running sequences (max_num_seqs, -np, --slots)


@dataclass(frozen=True)
class Workload:
    """Every request: ``prompt_tokens`` as the server counts them (chat template
    included), ``output_tokens`` generated (ignore_eos)."""

    prompt_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        check_positive(self.prompt_tokens, "--prompt-tokens")
        check_positive(self.output_tokens, "--output-tokens")

    @property
    def kv_tokens(self) -> int:
        """Tokens whose K/V a sequence holds at its longest: P + O - 1."""
        return self.prompt_tokens + self.output_tokens - 1


@dataclass(frozen=True)
class Knee:
    """A server's knee for one workload and budget.

    ``fits``: the most sequences in flight with no queueing and no preemption;
    ``first_past`` = fits + 1, where ``past`` happens. ``bound``: the budget or the
    server's cap on running sequences (``max_seqs``). ``per_seq``: blocks
    (or cells) one sequence holds at its longest, as the pool counts them;
    ``capacity``: the pool's usable blocks (cells); ``unit``: "blocks" or "cells".
    ``admit_per_step``: prompts one step's prefill budget takes (None: not paged);
    a burst larger than it waits a step even below the knee. ``budget_bytes``: the
    KV bytes of the budget. ``layout``: the pool as the server lays it out.
    """

    server: str
    fits: int
    past: Past
    bound: Bound
    per_seq: int
    capacity: int
    unit: str
    max_seqs: int
    admit_per_step: int | None
    budget_bytes: int
    layout: str
    rule: str

    @property
    def first_past(self) -> int:
        """The first concurrency that queues, preempts or fails."""
        return self.fits + 1

    def usage(self, n_seqs: int) -> float:
        """The pool's use with ``n_seqs`` sequences at their longest (0..1+; vLLM's and
        kvlab's ``kv_cache_usage_perc``)."""
        return n_seqs * self.per_seq / self.capacity

    def as_dict(self) -> dict[str, object]:
        return {
            "server": self.server, "fits": self.fits, "first_past": self.first_past,
            "past": str(self.past), "bound": str(self.bound), "per_seq": self.per_seq,
            "capacity": self.capacity, "unit": self.unit, "max_seqs": self.max_seqs,
            "admit_per_step": self.admit_per_step, "budget_bytes": self.budget_bytes,
            "layout": self.layout, "usage_at_knee": self.usage(self.fits),
            "rule": self.rule,
        }


# -- a paged sequence, step by step --------------------------------------------------

def _steps(work: Workload, chunk: int) -> Iterator[tuple[int, int]]:
    """(tokens computed before, tokens with a slot after) for every step of one
    sequence: its prompt in chunks of at most ``chunk`` tokens, then one token a step."""
    done = 0
    while done < work.prompt_tokens:
        n = min(chunk, work.prompt_tokens - done)
        yield done, done + n
        done += n
    for computed in range(work.prompt_tokens, work.kv_tokens):
        yield computed, computed + 1


def held_blocks(computed: int, total: int, window: int | None, block: int) -> int:
    """Blocks one group holds for a step that gives slots up to ``total`` tokens, after
    the blocks before the window of the query at ``computed`` were freed (vLLM's
    ``get_num_skipped_tokens``: ``computed - window + 1`` tokens; kvlab's
    ``first_kept_block``)."""
    skipped = 0 if window is None else max(0, computed - window + 1)
    return -(-total // block) - skipped // block


def peak_blocks(work: Workload, groups: tuple[BlockGroup, ...], block: int, chunk: int) -> int:
    """The most blocks one sequence holds at once over ``groups`` drawing on one pool
    (each of a group's ``count`` tables counted)."""
    return max(sum(g.count * held_blocks(c, t, g.window, block) for g in groups)
               for c, t in _steps(work, chunk))


def _prompt_blocks(work: Workload, window: int | None, block: int, chunk: int) -> int:
    """Blocks a group needs to admit the request's whole prompt (vLLM's admission gate,
    capped for a sliding group at ``max_admission_blocks_per_request``)."""
    blocks = -(-work.prompt_tokens // block)
    if window is not None:
        blocks = min(blocks, -(-(window - 1 + chunk) // block) + 1)
    return blocks


def _cap(kv_fit: int, max_seqs: int, past_kv: Past) -> tuple[int, Past, Bound]:
    """The knee under the server's cap on running sequences: at the cap, the next
    request waits for a place in the running set."""
    if max_seqs <= kv_fit:
        return max_seqs, Past.QUEUE, Bound.SLOTS
    return kv_fit, past_kv, Bound.KV


def _too_small(server: str, need: int, have: int, unit: str, fix: str) -> ConfigError:
    return ConfigError(f"{server}: one sequence of this workload holds {need} {unit}, "
                       f"the budget gives {have}; {fix}")


# -- vLLM ------------------------------------------------------------------------------

def vllm_knee(
    shape: ModelShape, work: Workload, num_gpu_blocks: int, block_size: int, *,
    max_num_seqs: int = VLLM_CPU_MAX_NUM_SEQS,
    max_num_batched_tokens: int = VLLM_CPU_MAX_BATCHED_TOKENS, dtype: str = "bf16",
) -> Knee:
    """vLLM's knee: ``num_gpu_blocks`` as /metrics' ``cache_config_info`` reports it
    (the null block included) or ``--num-gpu-blocks-override``."""
    for value, what in ((num_gpu_blocks, "num_gpu_blocks"), (block_size, "--block-size"),
                        (max_num_seqs, "max_num_seqs"),
                        (max_num_batched_tokens, "max_num_batched_tokens")):
        check_positive(value, what)
    groups = vllm_groups(shape)
    usable = num_gpu_blocks - 1  # the null block
    per_seq = peak_blocks(work, groups, block_size, max_num_batched_tokens)
    admit = sum(g.count * _prompt_blocks(work, g.window, block_size, max_num_batched_tokens)
                for g in groups)
    # The last one admitted needs its prompt's blocks free while the others may hold
    # their peak (a long prompt's gate can exceed what a sliding group then holds).
    first = max(per_seq, admit)
    if first > usable:
        raise _too_small("vLLM", first, usable, "blocks (the null block left out)",
                         "raise num_gpu_blocks or shorten the workload")
    kv_fit = 1 + (usable - first) // per_seq
    past_kv = Past.PREEMPT if (kv_fit + 1) * admit <= usable else Past.QUEUE
    fits, past, bound = _cap(kv_fit, max_num_seqs, past_kv)
    return Knee(
        server="vllm", fits=fits, past=past, bound=bound, per_seq=per_seq, capacity=usable,
        unit="blocks", max_seqs=max_num_seqs,
        admit_per_step=max_num_batched_tokens // work.prompt_tokens,
        budget_bytes=num_gpu_blocks * vllm_block_bytes(shape, block_size, dtype),
        layout=f"one pool of {num_gpu_blocks} blocks of {block_size} tokens (1 null) shared "
               "by " + ", ".join(g.describe() for g in groups),
        rule=f"{per_seq} blocks per sequence over every group, {usable} usable; admitted "
             f"with its prompt's {admit} blocks, grows, preempts the newest when short",
    )


# -- kvlab serve -----------------------------------------------------------------------

def kvlab_groups(shape: ModelShape) -> tuple[BlockGroup, ...]:
    """kvlab's window groups: one per distinct window (full attention: None), each with
    its own pool of ``kv_blocks`` blocks (engine/paged.py, ``BlockPool.__init__``)."""
    layers: dict[int | None, int] = {}
    for il in range(shape.n_layers):
        if shape.kv_heads[il]:
            window = shape.n_swa if shape.is_swa[il] and shape.n_swa else None
            layers[window] = layers.get(window, 0) + 1
    return tuple(BlockGroup(w, n) for w, n in sorted(layers.items(), key=lambda kv: kv[0] or 0))


def kvlab_budget_bytes(shape: ModelShape, kv_blocks: int, block_size: int, dtype: str) -> int:
    """Bytes of kvlab serve's pool: ``kv_blocks`` blocks of ``block_size`` tokens on every
    layer (each window group has its own pool of that many)."""
    dt = get_dtype(dtype)
    token_bytes = sum(row_bytes(dt, shape.k_width(il)) + row_bytes(dt, shape.v_width(il))
                      for il in range(shape.n_layers) if shape.kv_heads[il])
    return kv_blocks * block_size * token_bytes


def kvlab_knee(
    shape: ModelShape, work: Workload, kv_blocks: int, block_size: int = 16, *,
    slots: int = 16, prefill_budget: int = 256, dtype: str = "f32",
) -> Knee:
    """``kvlab serve --kv-blocks kv_blocks --block-size block_size --slots slots
    --prefill-budget prefill_budget``'s knee (``dtype``: the KV's, the weights' float
    type)."""
    for value, what in ((kv_blocks, "--kv-blocks"), (block_size, "--block-size"),
                        (slots, "--slots"), (prefill_budget, "--prefill-budget")):
        check_positive(value, what)
    groups = kvlab_groups(shape)
    peaks = [peak_blocks(work, (g,), block_size, prefill_budget) for g in groups]
    per_seq = max(peaks)
    if per_seq > kv_blocks:
        raise _too_small("kvlab serve", per_seq, kv_blocks, "blocks on one group",
                         "raise --kv-blocks or shorten the workload")
    kv_fit = min(kv_blocks // p for p in peaks)
    first_chunk = -(-min(work.prompt_tokens, prefill_budget) // block_size)
    past_kv = Past.PREEMPT if (kv_fit + 1) * first_chunk <= kv_blocks else Past.QUEUE
    fits, past, bound = _cap(kv_fit, slots, past_kv)
    return Knee(
        server="kvlab", fits=fits, past=past, bound=bound, per_seq=per_seq,
        capacity=kv_blocks, unit="blocks", max_seqs=slots,
        admit_per_step=prefill_budget // work.prompt_tokens,
        budget_bytes=kvlab_budget_bytes(shape, kv_blocks, block_size, dtype),
        layout=f"a pool of {kv_blocks} blocks of {block_size} tokens for each of "
               + ", ".join(g.describe() for g in groups),
        rule=f"{per_seq} blocks per sequence on its fullest group, {kv_blocks} per group; "
             f"admitted with its first chunk's {first_chunk} blocks, grows, preempts the "
             "youngest when short",
    )


# -- llama-server ----------------------------------------------------------------------

def llamacpp_knee(
    shape: ModelShape, work: Workload, n_ctx: int, n_seq: int, *, kv_unified: bool = False,
    type_k: str = "f16", type_v: str = "f16", n_ubatch: int = 512, n_batch: int = 2048,
) -> Knee:
    """``llama-server -c n_ctx -np n_seq [-kvu]``'s knee."""
    pred = predict_llamacpp_kv(shape, n_ctx, n_seq=n_seq, kv_unified=kv_unified,
                               type_k=type_k, type_v=type_v, n_ubatch=n_ubatch,
                               n_batch=n_batch)
    slot_ctx = pred.n_ctx_seq if shape.n_ctx_train is None \
        else min(pred.n_ctx_seq, shape.n_ctx_train)
    # A slot stops with truncated = true once prompt + sampled + 1 reaches its context
    # (server-context.cpp, process_token), so a request ends in full only below it.
    if work.prompt_tokens + work.output_tokens + 1 > slot_ctx:
        raise ConfigError(
            f"llama-server: a slot holds {slot_ctx} cells and a request of "
            f"{work.prompt_tokens} + {work.output_tokens} tokens needs "
            f"{work.prompt_tokens + work.output_tokens + 1}; it would end truncated. "
            "Raise -c or lower -np")
    caches = ", ".join(f"{c.kind} {c.cells} cells x {c.n_stream}" for c in pred.caches)
    if not kv_unified:
        return Knee(
            server="llamacpp", fits=n_seq, past=Past.QUEUE, bound=Bound.SLOTS,
            per_seq=work.kv_tokens, capacity=pred.n_ctx, unit="cells", max_seqs=n_seq,
            admit_per_step=None, budget_bytes=pred.total_bytes,
            layout=f"{n_seq} slots of {pred.n_ctx_seq} cells each ({caches})",
            rule=f"each of {n_seq} slots owns {pred.n_ctx_seq} cells and a request takes "
                 f"{work.kv_tokens}; request {n_seq + 1} waits for a free slot",
        )
    kv_fit = pred.n_ctx // work.kv_tokens
    fits, past, bound = _cap(kv_fit, n_seq, Past.ERROR)
    return Knee(
        server="llamacpp", fits=fits, past=past, bound=bound, per_seq=work.kv_tokens,
        capacity=pred.n_ctx, unit="cells", max_seqs=n_seq, admit_per_step=None,
        budget_bytes=pred.total_bytes,
        layout=f"{n_seq} slots sharing {pred.n_ctx} cells ({caches})",
        rule=f"the slots share {pred.n_ctx} cells and a sequence takes {work.kv_tokens}; "
             "past them the batch halves, then every active request fails",
    )
