"""The embedded server (``python -m kvlab serve``) as a launched server kind.

One process per (mode, capacity): ``--ctx-size`` is the capacity being measured; the
toy ``--preset`` or a real ``--model`` (Gemma 3 270M loads in about 20 s). The
process runs in its own session so a terminal Ctrl-C reaches the runner only; the
runner stops the server itself (SIGTERM, then SIGKILL) on every exit path, and
:mod:`kvlab.servers.process` makes sure none outlives kvlab.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, ClassVar, Literal

from pydantic import Field

import kvlab
from kvlab.errors import ConfigError, KvlabError
from kvlab.memory.served import PoolName, ServedKv
from kvlab.memory.shapes import ModelShape
from kvlab.metric_names import EMBEDDED
from kvlab.servers.base import ServerSettings
from kvlab.servers.process import ServerProcess, free_port


class EmbeddedSettings(ServerSettings):
    """``kvlab serve`` options (``[modes.embedded]``); ``--ctx-size`` is the capacity."""

    kind: Literal["embedded"] = "embedded"
    preset: str = "toy"
    model: str | None = None  # gemma-3-270m or a GGUF path: served instead of the preset
    no_cache: bool = False
    threads: int | None = Field(default=None, ge=1)
    # Continuous batching (kvlab serve --slots/--kv-blocks/--block-size): 1 = one slot.
    slots: int = Field(default=1, ge=1)
    kv_blocks: int | None = Field(default=None, ge=1)
    block_size: int | None = Field(default=None, ge=1)
    # The engine's serving path (kvlab serve --dtype/--prefill-budget/--no-prefix-cache):
    # None keeps kvlab serve's default.
    dtype: Literal["float32", "bfloat16", "int8", "w8a8"] | None = None
    prefill_budget: int | None = Field(default=None, ge=1)
    prefix_cache: bool = True

    program = "kvlab serve"
    old_spellings = ("kvlab", "kvlab-serve", "kvlab serve")
    metric_names = EMBEDDED
    kv_pool: ClassVar[PoolName] = "paged-blocks"

    def build(self, capacity: int) -> EmbeddedServer:
        return EmbeddedServer(capacity, self.preset, self.no_cache, self.threads,
                              model=self.model, slots=self.slots, kv_blocks=self.kv_blocks,
                              block_size=self.block_size, dtype=self.dtype,
                              prefill_budget=self.prefill_budget,
                              prefix_cache=self.prefix_cache)

    def model_name(self) -> str:
        return self.model or self.preset


class EmbeddedServer(ServerProcess):
    """``kvlab serve`` on a free loopback port, configured for one capacity."""

    program = "kvlab serve"
    poll_s = 0.1

    def __init__(
        self,
        capacity: int,
        preset: str = "toy",
        no_cache: bool = False,
        threads: int | None = None,
        port: int | None = None,
        model: str | None = None,
        slots: int = 1,
        kv_blocks: int | None = None,
        block_size: int | None = None,
        dtype: str | None = None,
        prefill_budget: int | None = None,
        prefix_cache: bool = True,
    ) -> None:
        super().__init__(port or free_port())
        self.capacity = capacity
        # slots > 1 or kv_blocks: continuous batching over a paged KV pool.
        self.slots, self.kv_blocks, self.block_size = slots, kv_blocks, block_size
        self.preset = preset
        self.model = model  # gemma-3-270m or a GGUF path; replaces the preset
        self.no_cache = no_cache
        self.threads = threads
        self.dtype, self.prefill_budget, self.prefix_cache = dtype, prefill_budget, prefix_cache

    def argv(self) -> list[str]:
        """The exact command line the server is started with."""
        argv = [sys.executable, "-m", "kvlab", "serve", "--host", self.host]
        argv += ["--port", str(self.port)]
        argv += ["--model", self.model] if self.model else ["--preset", self.preset]
        argv += ["--ctx-size", str(self.capacity)]
        if self.no_cache:
            argv.append("--no-cache")
        if self.threads is not None:
            argv += ["--threads", str(self.threads)]
        if self.slots != 1:
            argv += ["--slots", str(self.slots)]
        if self.kv_blocks is not None:
            argv += ["--kv-blocks", str(self.kv_blocks)]
        if self.block_size is not None:
            argv += ["--block-size", str(self.block_size)]
        if self.dtype is not None:
            argv += ["--dtype", self.dtype]
        if self.prefill_budget is not None:
            argv += ["--prefill-budget", str(self.prefill_budget)]
        if not self.prefix_cache:
            argv.append("--no-prefix-cache")
        return argv

    def prepare(self) -> None:
        """One line, before the spawn, when this kvlab has no engine to serve (a plain
        ``pip install kvlab``), rather than a server that exits during start-up."""
        try:
            found = importlib.util.find_spec("torch") is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ConfigError("the embedded server (kvlab serve) needs the engine extra: "
                              "pip install 'kvlab[engine]'")

    def facts(self) -> dict[str, Any]:
        """What the manifest keeps about this server."""
        return {
            "kind": "embedded",
            "argv": self.argv(),
            "version": f"kvlab {kvlab.__version__}",
            "threads": self.threads,
            "pid": self.pid,
            "base_url": self.base_url,
            "props": self.props(),
            "log": str(self.log_path) if self.log_path else None,
            "started_at": self.started_at,
            **served_facts(self.props()),
        }


def served_facts(props: dict[str, Any] | None) -> dict[str, Any]:
    """``kv_served`` (the paged pool's knee inputs, None with one slot) and
    ``weights_bytes`` (the engine's parameters and buffers), from kvlab serve's /props."""
    kv = (props or {}).get("kvlab") or {}
    paged, shape = kv.get("paged_kv"), kv.get("kv_shape")
    served = None
    if paged and shape:
        try:
            served = ServedKv(EmbeddedSettings.kv_pool, ModelShape.from_dict(shape),
                              str(kv.get("kv_dtype")),
                              max_seqs=int((props or {})["total_slots"]),
                              block_size=int(paged["block_size"]),
                              prefill_budget=int(paged["prefill_budget"]),
                              kv_blocks=int(paged["blocks"]),
                              prefix_caching=bool(paged.get("prefix_caching"))).to_dict()
        except (KvlabError, KeyError, TypeError, ValueError):
            served = None
    return {"kv_served": served, "weights_bytes": kv.get("weights_bytes")}

