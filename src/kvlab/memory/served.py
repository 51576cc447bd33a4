"""A launched server's KV budget as kvlab launched it, and its knee once the server has
said what it allocated.

A run keeps one :class:`ServedKv` per launched server in its manifest (the server's
facts, ``kv_served``): the model's shape and the settings the knee depends on, in the
server's own units, and the rule its pool follows (``pool``, one of :data:`POOLS`: a
server kind picks the rule of the pool it keeps, so no kind is named here). The budget
itself is the server's word where it reports one on ``/metrics``
(:mod:`kvlab.memory.budget_metrics`): vLLM's ``num_gpu_blocks`` and block size
(``cache_config_info``), kvlab serve's ``kv_blocks_total``. llama-server reports none
there; its budget is its command line (``-c``, ``-np``), which ``/props`` echoes.
:meth:`ServedKv.knee` then gives :mod:`kvlab.memory.knee`'s prediction for a workload.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from kvlab.errors import ConfigError
from kvlab.memory.budget_metrics import kvlab_blocks, vllm_blocks
from kvlab.memory.knee import (
    Knee,
    Workload,
    kvlab_budget_bytes,
    kvlab_knee,
    llamacpp_knee,
    vllm_knee,
)
from kvlab.memory.llamacpp import predict_llamacpp_kv
from kvlab.memory.shapes import ModelShape
from kvlab.memory.vllm_blocks import vllm_block_bytes

PoolName = Literal["vllm-blocks", "paged-blocks", "llamacpp-slots"]
"""How a server holds its KV budget: vLLM's blocks (read from its /metrics), a pool of
blocks like the embedded engine's (``kv_blocks_total`` or the launch's ``--kv-blocks``),
llama.cpp's cells over slots (its command line)."""

# manifests written before ``pool`` named the rule: the ``server`` they named instead
_OLD_SERVER: dict[str, PoolName] = {"vllm": "vllm-blocks", "kvlab": "paged-blocks",
                                    "llamacpp": "llamacpp-slots"}


@dataclass(frozen=True)
class ServedKv:
    """What one server's knee depends on, as launched.

    ``dtype``: the KV cache's element type (:mod:`kvlab.memory.dtypes` names: bf16,
    f32, f16...); ``max_seqs``: the cap on running sequences (vLLM ``max_num_seqs``,
    kvlab ``--slots``, llama.cpp ``-np``). Paged servers: ``block_size`` (tokens; vLLM:
    None until /metrics says), ``prefill_budget`` (prompt tokens per step: vLLM
    ``max_num_batched_tokens``, kvlab ``--prefill-budget``), ``kv_blocks`` (the pool as
    launched, None: the server's default; /metrics wins), ``prefix_caching`` (full
    blocks kept for later prompts). llama.cpp: ``n_ctx`` (``-c``, every slot's cells),
    ``unified`` (``-kvu``), ``type_v``, ``ubatch``, ``batch``.
    """

    pool: PoolName
    shape: ModelShape
    dtype: str
    max_seqs: int
    block_size: int | None = None
    prefill_budget: int | None = None
    kv_blocks: int | None = None
    prefix_caching: bool = False
    n_ctx: int | None = None
    unified: bool = False
    type_v: str | None = None
    ubatch: int = 512
    batch: int = 2048

    def __post_init__(self) -> None:
        if self.pool not in POOLS:
            raise ConfigError(f"kv_served: unknown pool {self.pool!r} (one of "
                              f"{', '.join(POOLS)})")

    @property
    def _pool(self) -> _Pool:
        return POOLS[self.pool]

    def knee(self, work: Workload, metrics: str | None = None) -> Knee:
        """The knee of ``work`` under this budget; ``metrics``: the server's /metrics
        text (its reported budget). ConfigError when the budget is not known."""
        return self._pool.knee(self, work, metrics)

    def kv_bytes(self, metrics: str | None = None) -> int:
        """The bytes of the whole KV budget (``metrics``: as in :meth:`knee`)."""
        return self._pool.kv_bytes(self, metrics)

    def budget_source(self, metrics: str | None = None) -> str:
        """Where :meth:`knee` reads the budget from, in words."""
        return self._pool.budget_source(metrics)

    def prefix_pool(self, metrics: str | None = None) -> tuple[int, int]:
        """(blocks a prefix cache can keep, tokens per block) of a paged server with
        prefix caching and one block group (a model without sliding-window layers);
        ConfigError naming what is missing otherwise."""
        if self._pool.no_lru:
            raise ConfigError(self._pool.no_lru)
        if not self.prefix_caching:
            raise ConfigError("the server was launched without prefix caching")
        if self.shape.n_swa_layers:
            raise ConfigError("sliding-window layers keep their own blocks; the LRU "
                              "prediction covers one block group")
        return self._pool.prefix_pool(self, metrics)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for the manifest."""
        out = asdict(self)
        out["shape"] = self.shape.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServedKv:
        """What :meth:`to_dict` wrote; ConfigError for anything else. A manifest written
        before ``pool`` (its ``server`` named the kind) is read with that kind's rule."""
        names = {f.name for f in fields(cls)}
        data = migrate(data)
        try:
            shape = ModelShape.from_dict(dict(data["shape"]))
            return cls(**{**{k: v for k, v in data.items() if k in names}, "shape": shape})
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"kv_served is not a served KV budget ({exc})") from None


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A ``kv_served`` written before ``pool`` (its ``server`` named the kind) with the
    pool of that kind's rule; any other as it is."""
    if "pool" not in data and data.get("server") in _OLD_SERVER:
        return {**data, "pool": _OLD_SERVER[str(data["server"])]}
    return data


class _Pool(ABC):
    """How one kind of server holds its KV budget: its knee, its bytes, where the budget
    is read from and the pool its prefix cache keeps. One per :data:`PoolName`."""

    @abstractmethod
    def knee(self, kv: ServedKv, work: Workload, metrics: str | None) -> Knee: ...

    @abstractmethod
    def kv_bytes(self, kv: ServedKv, metrics: str | None) -> int: ...

    @abstractmethod
    def budget_source(self, metrics: str | None) -> str: ...

    no_lru: str | None = None  # why the server keeps no LRU of blocks (None: it does)

    @abstractmethod
    def prefix_pool(self, kv: ServedKv, metrics: str | None) -> tuple[int, int]: ...


class _LlamaCppSlots(_Pool):
    """llama-server: ``-c`` cells over ``-np`` slots; its budget is its command line."""

    def knee(self, kv: ServedKv, work: Workload, metrics: str | None) -> Knee:
        return llamacpp_knee(kv.shape, work, self._n_ctx(kv), kv.max_seqs,
                             kv_unified=kv.unified, type_k=kv.dtype,
                             type_v=kv.type_v or kv.dtype, n_ubatch=kv.ubatch,
                             n_batch=kv.batch)

    def kv_bytes(self, kv: ServedKv, metrics: str | None) -> int:
        return predict_llamacpp_kv(
            kv.shape, self._n_ctx(kv), n_seq=kv.max_seqs, kv_unified=kv.unified,
            type_k=kv.dtype, type_v=kv.type_v or kv.dtype, n_ubatch=kv.ubatch,
            n_batch=kv.batch).total_bytes

    def budget_source(self, metrics: str | None) -> str:
        return "its command line (-c, -np), as /props reports it"

    no_lru = "llama-server keeps each slot's last prompt, not an LRU of blocks"

    def prefix_pool(self, kv: ServedKv, metrics: str | None) -> tuple[int, int]:
        raise ConfigError(self.no_lru)

    @staticmethod
    def _n_ctx(kv: ServedKv) -> int:
        if kv.n_ctx is None:
            raise ConfigError("llama-server's -c is not recorded")
        return kv.n_ctx


class _PagedBlocks(_Pool):
    """A pool of blocks (the embedded server's): /metrics' ``kv_blocks_total`` or
    ``--kv-blocks``."""

    def knee(self, kv: ServedKv, work: Workload, metrics: str | None) -> Knee:
        return kvlab_knee(kv.shape, work, self._blocks(kv, metrics), kv.block_size or 16,
                          slots=kv.max_seqs, prefill_budget=kv.prefill_budget or 256,
                          dtype=kv.dtype)

    def kv_bytes(self, kv: ServedKv, metrics: str | None) -> int:
        return kvlab_budget_bytes(kv.shape, self._blocks(kv, metrics), kv.block_size or 16,
                                  kv.dtype)

    def budget_source(self, metrics: str | None) -> str:
        return ("its /metrics (kv_blocks_total)" if metrics is not None
                else "its launch (--kv-blocks); no /metrics reading")

    def prefix_pool(self, kv: ServedKv, metrics: str | None) -> tuple[int, int]:
        return self._blocks(kv, metrics), kv.block_size or 16

    @staticmethod
    def _blocks(kv: ServedKv, metrics: str | None) -> int:
        blocks = kvlab_blocks(metrics) if metrics is not None else kv.kv_blocks
        if blocks is None:
            raise ConfigError("kvlab serve's kv_blocks: no /metrics reading and none given "
                              "at launch")
        return blocks


class _VllmBlocks(_Pool):
    """vLLM: the blocks /metrics' ``cache_config_info`` reports, and no other source."""

    def knee(self, kv: ServedKv, work: Workload, metrics: str | None) -> Knee:
        blocks, block_size = self._pool(metrics)
        kwargs = {"max_num_batched_tokens": kv.prefill_budget} if kv.prefill_budget else {}
        return vllm_knee(kv.shape, work, blocks, block_size, max_num_seqs=kv.max_seqs,
                         dtype=kv.dtype, **kwargs)

    def kv_bytes(self, kv: ServedKv, metrics: str | None) -> int:
        blocks, block_size = self._pool(metrics)
        return blocks * vllm_block_bytes(kv.shape, block_size, kv.dtype)

    def budget_source(self, metrics: str | None) -> str:
        return "its /metrics (cache_config_info: num_gpu_blocks, block_size)"

    def prefix_pool(self, kv: ServedKv, metrics: str | None) -> tuple[int, int]:
        blocks, block_size = self._pool(metrics)
        return blocks - 1, block_size  # the null block aside

    @staticmethod
    def _pool(metrics: str | None) -> tuple[int, int]:
        if metrics is None:
            raise ConfigError("vLLM's num_gpu_blocks comes from its /metrics "
                              "(cache_config_info); no reading of it")
        return vllm_blocks(metrics)


POOLS: dict[PoolName, _Pool] = {"vllm-blocks": _VllmBlocks(), "paged-blocks": _PagedBlocks(),
                                "llamacpp-slots": _LlamaCppSlots()}
"""Each rule's knee, bytes and prefix pool: the one place a pool's rule decides anything."""
