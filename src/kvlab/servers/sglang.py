"""SGLang as a launched server kind, faked: kvlab's synthetic server in its place.

A throwaway kind (issue 38): it shows that a kind is one settings class, one server
file and one registry line. The process is ``kvlab serve-synthetic`` on a free port,
so it answers every API on a schedule; it declares no ``metric_names`` and no
``kv_pool`` (and records no ``kv_served``), so the knee, counter and trace-hit checks
say "not measured: sglang exposes no ..." for it.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

from pydantic import Field

from kvlab.servers.base import ServerSettings
from kvlab.servers.process import ServerProcess


class SglangSettings(ServerSettings):
    """The fake's schedule (``[modes.sglang]``): first token after ``ttft_ms``, then one
    token every ``itl_ms``, ``tokens`` when a request asks for none."""

    kind: Literal["sglang"] = "sglang"
    ttft_ms: float = Field(default=20.0, ge=0)
    itl_ms: float = Field(default=5.0, ge=0)
    tokens: int = Field(default=16, ge=1)

    program = "sglang (fake)"

    def build(self, capacity: int) -> SglangServer:
        return SglangServer(self, capacity)

    def model_name(self) -> str:
        return "synthetic"


class SglangServer(ServerProcess):
    """The fake SGLang of one capacity (the synthetic server ignores it)."""

    program = "sglang (fake)"

    def __init__(self, settings: SglangSettings, capacity: int) -> None:
        super().__init__()
        self.settings, self.capacity = settings, capacity

    def argv(self) -> list[str]:
        """``python -m kvlab serve-synthetic`` on this server's port."""
        s = self.settings
        return [sys.executable, "-m", "kvlab", "serve-synthetic", "--host", self.host,
                "--port", str(self.port or 0), "--ttft-ms", f"{s.ttft_ms:g}",
                "--itl-ms", f"{s.itl_ms:g}", "--tokens", str(s.tokens)]

    def facts(self) -> dict[str, Any]:
        """Its command line, process and log: no KV budget, no weights."""
        return {"kind": "sglang", "argv": self.argv(), "version": "", "pid": self.pid,
                "base_url": self.base_url, "log": str(self.log_path) if self.log_path
                else None, "started_at": self.started_at}
