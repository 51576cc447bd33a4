"""What llama.cpp will allocate for a model's KV cache, line by line of its log.

Rules, from llama.cpp's ``src/llama-context.cpp`` and ``src/llama-kv-cache*.cpp``
(reference: shared/reference/llamacpp-server.md section 5):

* ``n_ctx`` is padded up to a multiple of 256.
* Not unified (``-np N``): N streams of ``n_ctx_seq = pad256(n_ctx / N)`` cells each,
  and ``n_ctx`` becomes ``n_ctx_seq x N``. Unified (``-kvu``, or ``-np`` auto): one
  stream of ``n_ctx`` cells shared by every sequence.
* ``n_batch = min(n_ctx as given, -b)``, ``n_ubatch = min(n_batch, -ub)``.
* A model with sliding-window layers gets two caches: the global layers with
  ``n_ctx_seq`` cells, the sliding ones with
  ``pad256(min(n_ctx_seq, n_swa x (unified ? N : 1) + n_ubatch))`` cells, or
  ``n_ctx_seq`` with ``--swa-full``.
* A cache's size is ``sum over its layers of (row(type_k, K width) + row(type_v,
  V width)) x cells x streams``. With flash attention off, V is stored transposed and
  every V row takes the widest layer's width.

Assumptions: ``-c`` is given (not 0) and ``--fit`` does not shrink it (pass
``-c`` and ``-ngl``); the architecture uses llama.cpp's standard or iSWA cache (not
MLA, recurrent/hybrid memory or shared-KV layers such as Gemma 3n's); "MiB" figures
are formatted as llama.cpp does (float32 bytes / 2^20, two decimals).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from kvlab.errors import ConfigError
from kvlab.memory.dtypes import get_dtype, row_bytes
from kvlab.memory.formula import check_positive
from kvlab.memory.shapes import ModelShape

CELL_PAD = 256  # llama.cpp pads n_ctx, n_ctx_seq and the SWA cache to this


def ctx_size_for(capacity: int, n_seq: int) -> int:
    """The ``-c`` that gives each of ``n_seq`` slots a context of ``capacity`` tokens.

    llama.cpp's ``-c`` is the total over the slots: with ``-np N`` (not unified) each
    slot gets ``pad256(pad256(-c) / N)`` cells, so ``capacity x N`` gives every slot
    ``pad256(capacity)`` cells: what one slot gets from ``-c capacity -np 1``.
    kvlab's capacity is always the context of one sequence, on every server kind.
    """
    check_positive(capacity, "the capacity (context of one sequence)")
    check_positive(n_seq, "the number of sequences/slots (-np)")
    return capacity * n_seq


def pad256(n: int) -> int:
    """Round ``n`` up to a multiple of 256 (ggml's ``GGML_PAD(n, 256)``)."""
    return (n + CELL_PAD - 1) // CELL_PAD * CELL_PAD


def llama_mib(n_bytes: int) -> str:
    """Bytes as llama.cpp prints MiB: ``(float)bytes / (1024.0f*1024.0f)``, ``%.2f``."""
    as_f32 = struct.unpack("f", struct.pack("f", float(n_bytes)))[0]
    return f"{as_f32 / 1048576.0:.2f}"


@dataclass(frozen=True)
class LlamaCppCache:
    """One ``llama_kv_cache`` as llama.cpp creates it (one ``size =`` log line)."""

    kind: str  # "kv" (the only cache), "non-SWA" or "SWA"
    cells: int  # per stream (the log's "cells")
    n_layers: int
    n_seq_max: int
    n_stream: int
    type_k: str
    type_v: str
    k_bytes: int  # all streams
    v_bytes: int

    @property
    def size_bytes(self) -> int:
        return self.k_bytes + self.v_bytes

    def log_line(self) -> str:
        """The line llama.cpp logs for this cache (without its timestamp prefix)."""
        return (
            f"llama_kv_cache: size = {llama_mib(self.size_bytes):>7} MiB ({self.cells:6d} cells, "
            f"{self.n_layers:3d} layers, {self.n_seq_max:2d}/{self.n_stream} seqs), "
            f"K ({self.type_k}): {llama_mib(self.k_bytes):>7} MiB, "
            f"V ({self.type_v}): {llama_mib(self.v_bytes):>7} MiB"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "cells": self.cells,
            "n_layers": self.n_layers,
            "n_seq_max": self.n_seq_max,
            "n_stream": self.n_stream,
            "type_k": self.type_k,
            "type_v": self.type_v,
            "k_bytes": self.k_bytes,
            "v_bytes": self.v_bytes,
            "bytes": self.size_bytes,
            "size_mib": llama_mib(self.size_bytes),
            "k_mib": llama_mib(self.k_bytes),
            "v_mib": llama_mib(self.v_bytes),
            "log_line": self.log_line(),
        }


@dataclass(frozen=True)
class LlamaCppKvPrediction:
    """Every KV cache llama.cpp creates for one server configuration."""

    model: str
    n_ctx_requested: int  # -c as given
    n_ctx: int  # after padding (and rounding to a multiple of n_seq when not unified)
    n_ctx_seq: int  # cells per stream of the global cache
    n_seq: int  # -np
    kv_unified: bool
    n_ubatch: int  # effective micro-batch, min(-b, -c, -ub)
    swa_full: bool
    flash_attn: bool
    caches: tuple[LlamaCppCache, ...] = field(default_factory=tuple)

    @property
    def total_bytes(self) -> int:
        return sum(c.size_bytes for c in self.caches)

    def log_lines(self) -> list[str]:
        return [c.log_line() for c in self.caches]

    def as_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "n_ctx_requested": self.n_ctx_requested,
            "n_ctx": self.n_ctx,
            "n_ctx_seq": self.n_ctx_seq,
            "n_seq": self.n_seq,
            "kv_unified": self.kv_unified,
            "n_ubatch": self.n_ubatch,
            "swa_full": self.swa_full,
            "flash_attn": self.flash_attn,
            "bytes": self.total_bytes,
            "caches": [c.as_dict() for c in self.caches],
        }


def predict_llamacpp_kv(
    shape: ModelShape,
    n_ctx: int,
    *,
    n_seq: int = 1,
    kv_unified: bool = False,
    type_k: str = "f16",
    type_v: str = "f16",
    n_ubatch: int = 512,
    swa_full: bool = False,
    n_batch: int = 2048,
    flash_attn: bool = True,
) -> LlamaCppKvPrediction:
    """The KV caches ``llama-server -c n_ctx -np n_seq [-kvu] -ctk -ctv -ub -b`` creates.

    ``flash_attn`` False stores V transposed (padded to the widest layer) and refuses a
    block-quantized V cache, as llama.cpp does.
    """
    check_positive(n_ctx, "the context size (-c)")
    check_positive(n_seq, "the number of sequences/slots (-np)")
    check_positive(n_ubatch, "the micro-batch size (-ub)")
    check_positive(n_batch, "the batch size (-b)")
    dk, dv = get_dtype(type_k), get_dtype(type_v)
    if dv.is_block and not flash_attn:
        raise ConfigError(f"a quantized V cache ({dv.name}) needs flash attention on (-fa on)")

    ubatch = min(min(n_ctx, n_batch), n_ubatch)
    ctx = pad256(n_ctx)
    if kv_unified:
        n_ctx_seq, n_stream = ctx, 1
    else:
        n_ctx_seq, n_stream = pad256(ctx // n_seq), n_seq
        if n_ctx_seq == 0:
            raise ConfigError(f"-c {n_ctx} leaves no cell per sequence for -np {n_seq}")
        ctx = n_ctx_seq * n_seq

    v_pad = None if flash_attn else max(shape.v_width(il) for il in range(shape.n_layers))

    def cache(kind: str, layers: list[int], cells: int) -> LlamaCppCache:
        k = sum(row_bytes(dk, shape.k_width(il)) for il in layers) * cells * n_stream
        v = sum(row_bytes(dv, v_pad or shape.v_width(il)) for il in layers) * cells * n_stream
        return LlamaCppCache(kind, cells, len(layers), n_seq, n_stream, dk.name, dv.name, k, v)

    with_kv = [il for il in range(shape.n_layers) if shape.kv_heads[il] > 0]
    if shape.n_swa > 0 and any(shape.is_swa):
        if swa_full:
            swa_cells = n_ctx_seq
        else:
            swa_cells = pad256(min(n_ctx_seq, shape.n_swa * (n_seq if kv_unified else 1) + ubatch))
        caches: tuple[LlamaCppCache, ...] = (
            cache("non-SWA", [il for il in with_kv if not shape.is_swa[il]], n_ctx_seq),
            cache("SWA", [il for il in with_kv if shape.is_swa[il]], swa_cells),
        )
    else:
        caches = (cache("kv", with_kv, n_ctx_seq),)
    return LlamaCppKvPrediction(
        model=shape.name,
        n_ctx_requested=n_ctx,
        n_ctx=ctx,
        n_ctx_seq=n_ctx_seq,
        n_seq=n_seq,
        kv_unified=kv_unified,
        n_ubatch=ubatch,
        swa_full=swa_full,
        flash_attn=flash_attn,
        caches=caches,
    )


# -- reading the server's log ---------------------------------------------------------

_SIZE_LINE = re.compile(
    r"llama_kv_cache: size =\s*(?P<size>[\d.]+) MiB \(\s*(?P<cells>\d+) cells,\s*"
    r"(?P<layers>\d+) layers,\s*(?P<seq_max>\d+)/(?P<stream>\d+) seqs\), "
    r"K \((?P<tk>\w+)\):\s*(?P<k>[\d.]+) MiB, V \((?P<tv>\w+)\):\s*(?P<v>[\d.]+) MiB"
)


@dataclass(frozen=True)
class ObservedKvCache:
    """One ``llama_kv_cache: size = ...`` line from a llama.cpp log (MiB as printed)."""

    size_mib: str
    cells: int
    n_layers: int
    n_seq_max: int
    n_stream: int
    type_k: str
    k_mib: str
    type_v: str
    v_mib: str


def parse_kv_cache_log(text: str) -> list[ObservedKvCache]:
    """Every KV-cache size line in a llama.cpp log, in order (needs ``-lv 4``)."""
    return [
        ObservedKvCache(
            m["size"],
            int(m["cells"]),
            int(m["layers"]),
            int(m["seq_max"]),
            int(m["stream"]),
            m["tk"],
            m["k"],
            m["tv"],
            m["v"],
        )
        for m in _SIZE_LINE.finditer(text)
    ]


def compare_with_log(
    prediction: LlamaCppKvPrediction, observed: list[ObservedKvCache]
) -> list[str]:
    """Differences between a prediction and the parsed log lines; empty when they agree."""
    if len(observed) != len(prediction.caches):
        return [f"predicted {len(prediction.caches)} KV caches, the log shows {len(observed)}"]
    problems = []
    for pred, obs in zip(prediction.caches, observed, strict=True):
        want = (
            llama_mib(pred.size_bytes),
            pred.cells,
            pred.n_layers,
            pred.n_seq_max,
            pred.n_stream,
            pred.type_k,
            llama_mib(pred.k_bytes),
            pred.type_v,
            llama_mib(pred.v_bytes),
        )
        got = (
            obs.size_mib,
            obs.cells,
            obs.n_layers,
            obs.n_seq_max,
            obs.n_stream,
            obs.type_k,
            obs.k_mib,
            obs.type_v,
            obs.v_mib,
        )
        if want != got:
            problems.append(f"{pred.kind} cache: predicted {want}, log {got}")
    return problems
