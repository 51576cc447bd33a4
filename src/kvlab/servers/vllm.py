"""vLLM (``vllm serve``) as a launched server kind: settings, argv, start, stop, facts.

An experiment mode with ``server = "vllm"`` carries a :class:`VllmSettings` table;
:class:`VllmServer` turns it plus a context capacity into one ``vllm serve`` run from
vLLM's own environment (:mod:`kvlab.servers.vllm_env`) on a checkpoint folder
(:mod:`kvlab.servers.vllm_model`). What kvlab's protocol needs is on by default:

- prefix caching off (``--no-enable-prefix-caching``): every prompt of a capacity
  shares its padding, and vLLM's cache would answer it from memory;
- ``--enable-prompt-tokens-details``: without it vLLM reports no cached-token count,
  and kvlab could not show that no row reused a prefix;
- ``--max-model-len`` is the capacity (the context of one sequence).

vLLM runs as three processes (API server, EngineCore, Worker). They share the group
kvlab starts it in, and kvlab also notes every descendant's PID at start-up, so a stop
(or Ctrl-C, or kvlab's own death) leaves none behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx
from pydantic import Field, field_validator, model_validator

from kvlab.errors import ConfigError, KvlabError, ServerLaunchError
from kvlab.memory.hf_config import read_config_json, shape_from_hf_dict
from kvlab.memory.knee import VLLM_CPU_MAX_NUM_SEQS
from kvlab.memory.served import PoolName, ServedKv
from kvlab.metric_names import VLLM
from kvlab.servers.base import ServerSettings
from kvlab.servers.chat_template import LLAMACPP_CHATML
from kvlab.servers.process import STOP_GRACE_S, ServerProcess, log_tail
from kvlab.servers.vllm_env import VllmEnv, find_vllm, python_for_display
from kvlab.servers.vllm_model import ModelDir, check_hf_dir, convert_bundled
from kvlab.watchdog import descendants, start_ticks

# vLLM-CPU starts in 70-130 s on 2 cores (torch.compile runs on every start), longer on a
# loaded machine: more than the protocol's 180 s readiness default allows for.
STARTUP_TIMEOUT_S = 600.0
NO_BOS_TEMPLATE = "chat_template_no_bos.jinja"  # the bundled ChatML, BOS left out
SERVED_NAME = "gemma-3-270m"  # the model id of the bundled model's requests


class VllmSettings(ServerSettings):
    """How to launch one ``vllm serve`` (the ``[modes.vllm]`` table of a mode).

    ``None`` means "vLLM's own default" except where noted.
    """

    kind: Literal["vllm"] = "vllm"
    python: Path | None = None  # vLLM's environment; None: $KVLAB_VLLM_PYTHON, then kvlab's
    model: Path | None = None  # HF checkpoint folder; None: the bundled Gemma, converted
    served_model_name: str | None = None  # requests' "model"; None: gemma-3-270m / folder
    dtype: Literal["bfloat16", "float16", "float32", "auto"] = "bfloat16"  # --dtype
    max_model_len: int | None = Field(default=None, ge=1)  # None: the capacity
    max_num_seqs: int | None = Field(default=None, ge=1)  # --max-num-seqs (batch rows)
    # VLLM_CPU_KVCACHE_SPACE, which vLLM-CPU reads with int(): whole GiB only
    kv_cache_space_gib: int | None = Field(default=None, ge=1)
    # --kv-cache-memory-bytes: a budget below 1 GiB (kvlab memory --knee sizes it)
    kv_cache_bytes: int | None = Field(default=None, ge=1)
    # VLLM_CPU_OMP_THREADS_BIND verbatim ("auto", "0", "0-1"); or threads = N -> "0-(N-1)"
    cpu_bind: str | None = None
    threads: int | None = Field(default=None, ge=1)
    prefix_caching: bool = False  # off: kvlab's protocol forbids prefix reuse
    enforce_eager: bool = False  # no torch.compile: starts in ~33 s, decodes 15-25 % slower
    chat_template: Path | None = None  # None: the bundled model's ChatML, or the folder's
    # the bundled model's ChatML prints BOS, as vLLM's chat and Messages routes add none;
    # false for a mode sending Responses, whose route (vLLM 0.32) adds BOS itself, so
    # its prompts are chat's tokens, not one more (docs/apis/openai-responses.md)
    template_bos: bool = True
    # keep Responses answers so a request may name one in previous_response_id
    # (VLLM_ENABLE_RESPONSES_API_STORE=1; off: vLLM stores nothing, and says so)
    store_responses: bool = False
    # serve embeddings instead of generating: the model converted to a pooling one
    # (--runner pooling --convert embed), its hidden states pooled this way
    pooling: Literal["mean", "last", "cls"] | None = None
    extra_args: list[str] = Field(default_factory=list)  # appended verbatim
    startup_timeout_s: float = Field(default=STARTUP_TIMEOUT_S, gt=0)

    program = "vLLM"
    interleaves = False  # ~6.6 GB each: never two at once
    metric_names = VLLM
    kv_pool: ClassVar[PoolName] = "vllm-blocks"

    @field_validator("kv_cache_space_gib", mode="before")
    @classmethod
    def _whole_gib(cls, value: object) -> object:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{value:g} GiB: vLLM-CPU reads VLLM_CPU_KVCACHE_SPACE as whole "
                             "GiB; for a smaller budget give kv_cache_bytes")
        return value

    @model_validator(mode="after")
    def _one_binding(self) -> VllmSettings:
        if self.cpu_bind is not None and self.threads is not None:
            raise ValueError("give threads or cpu_bind, not both")
        return self

    def capacity_problem(self, capacity: int) -> str | None:
        if self.max_model_len is not None and self.max_model_len < capacity:
            return (f"max_model_len: {self.max_model_len} is below the capacity {capacity}, "
                    "so prompts sized for it would be refused; raise it or leave it unset "
                    "(it is then the capacity)")
        return None

    def build(self, capacity: int) -> VllmServer:
        problem = self.capacity_problem(capacity)
        if problem:
            raise ConfigError(f"vllm.{problem}")
        return VllmServer(self, capacity)

    def model_name(self) -> str:
        if self.served_model_name:
            return self.served_model_name
        return self.model.name if self.model is not None else SERVED_NAME

    def omp_bind(self) -> str | None:
        """VLLM_CPU_OMP_THREADS_BIND for these settings (None: vLLM's default)."""
        if self.threads is not None:
            return "0" if self.threads == 1 else f"0-{self.threads - 1}"
        return self.cpu_bind


class VllmServer(ServerProcess):
    """One ``vllm serve`` for one (mode, capacity); see :class:`ServerProcess`."""

    program = "vLLM"
    poll_s = 0.5

    def __init__(self, settings: VllmSettings, capacity: int) -> None:
        super().__init__()
        self.settings = settings
        self.capacity = capacity
        self.env_: VllmEnv | None = None
        self.model: ModelDir | None = None
        self.version_info: dict[str, Any] | None = None
        # the API server and its descendants at start-up: (pid, start time in clock ticks)
        self.processes: list[tuple[int, int]] = []

    # -- argv ------------------------------------------------------------------------

    def argv(self) -> list[str]:
        """The exact command line; before start, placeholders for what is not resolved."""
        s = self.settings
        head = self.env_.serve_argv() if self.env_ else \
            [str(python_for_display(s.python)), "-m", "vllm.entrypoints.cli.main", "serve"]
        model = str(self.model.path) if self.model else str(s.model or "<converted Gemma>")
        argv = [*head, model, "--served-model-name", s.model_name(), "--dtype", s.dtype,
                "--max-model-len", str(s.max_model_len or self.capacity)]
        if s.max_num_seqs is not None:
            argv += ["--max-num-seqs", str(s.max_num_seqs)]
        argv.append("--enable-prefix-caching" if s.prefix_caching
                    else "--no-enable-prefix-caching")
        argv.append("--enable-prompt-tokens-details")  # usage...cached_tokens per request
        if s.enforce_eager:
            argv.append("--enforce-eager")
        if s.kv_cache_bytes is not None:
            argv += ["--kv-cache-memory-bytes", str(s.kv_cache_bytes)]
        if s.pooling is not None:  # /v1/embeddings, no generation
            argv += ["--runner", "pooling", "--convert", "embed", "--pooler-config",
                     json.dumps({"pooling_type": s.pooling.upper()})]
        template = s.chat_template or (self.model.chat_template if self.model else None)
        if template is not None and s.chat_template is None and not s.template_bos:
            template = template.with_name(NO_BOS_TEMPLATE)  # written by prepare()
        if template is not None:
            argv += ["--chat-template", str(template)]
        argv += list(s.extra_args)
        port = str(self.port) if self.port is not None else "<free port>"
        return [*argv, "--host", self.host, "--port", port]

    def env(self) -> Mapping[str, str] | None:
        """kvlab's environment, offline, with vLLM-CPU's KV space and thread binding."""
        return {**os.environ, **self.env_overrides()}

    def env_overrides(self) -> dict[str, str]:
        """The variables kvlab sets for vLLM (kept in the manifest)."""
        s = self.settings
        out = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        if s.kv_cache_space_gib is not None:
            out["VLLM_CPU_KVCACHE_SPACE"] = str(s.kv_cache_space_gib)
        bind = s.omp_bind()
        if bind is not None:
            out["VLLM_CPU_OMP_THREADS_BIND"] = bind
        if s.store_responses:
            out["VLLM_ENABLE_RESPONSES_API_STORE"] = "1"
        return out

    # -- lifecycle (ServerProcess hooks) ---------------------------------------------

    def prepare(self) -> None:
        """Find vLLM's environment and the checkpoint (converting the bundled GGUF on
        first use)."""
        s = self.settings
        self.env_ = find_vllm(s.python)
        self.model = check_hf_dir(s.model) if s.model is not None \
            else convert_bundled(self.env_, "float32" if s.dtype == "float32" else "bfloat16")
        if s.chat_template is not None and not Path(s.chat_template).is_file():
            raise ConfigError(f"vllm.chat_template {s.chat_template} does not exist")
        bundled = self.model.chat_template
        if s.chat_template is None and not s.template_bos and bundled is not None:
            no_bos = bundled.with_name(NO_BOS_TEMPLATE)
            if not no_bos.is_file():  # written aside, then renamed: never half a file
                part = no_bos.with_suffix(f".{os.getpid()}.part")
                part.write_text(LLAMACPP_CHATML, encoding="utf-8")
                part.replace(no_bos)
        self.port = None  # a fresh free port for every start

    def start(self, log_path: Path, ready_timeout_s: float = 180.0) -> None:
        """As :meth:`ServerProcess.start`, waiting up to ``startup_timeout_s`` at least
        (vLLM compiles its model at every start); then notes vLLM's processes and
        ``/version``."""
        try:
            super().start(log_path, max(ready_timeout_s, self.settings.startup_timeout_s))
        except ServerLaunchError as exc:
            first = str(exc).splitlines()[0]
            error = last_error_line(self.log_path)
            raise ServerLaunchError(f"{first}; {f'last error: {error}; ' if error else ''}"
                                    f"log: {self.log_path}") from None
        pids = [self.pid or 0, *descendants(self.pid or 0)]
        self.processes = [(pid, started) for pid in pids
                          if (started := start_ticks(pid)) is not None]
        with contextlib.suppress(httpx.HTTPError, ValueError):
            self.version_info = httpx.get(f"{self.base_url}/version", timeout=10.0).json()

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the group, then any vLLM process that left it; safe to call twice."""
        super().stop(grace_s)
        deadline = time.monotonic() + grace_s
        while (alive := self.alive_processes()) and time.monotonic() < deadline:
            time.sleep(0.1)  # EngineCore and the Worker end a moment after the API server
        for pid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def alive_processes(self) -> list[int]:
        """vLLM's processes noted at start-up that still run (a reused PID excluded)."""
        return [pid for pid, started in self.processes if start_ticks(pid) == started]

    def props(self) -> dict[str, Any] | None:
        """vLLM has no ``/props``; its ``/v1/models`` entry instead (max_model_len)."""
        if self._props is None and self.is_alive():
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, IndexError):
                answer = httpx.get(f"{self.base_url}/v1/models", timeout=10.0)
                self._props = answer.json()["data"][0]
        return self._props

    # -- facts -----------------------------------------------------------------------

    def facts(self) -> dict[str, Any]:
        """What the manifest keeps about this server (no secrets)."""
        return {
            "kind": "vllm",
            "argv": self.argv(),
            "env": self.env_overrides(),
            "capacity": self.capacity,
            "settings": self.settings.model_dump(mode="json"),
            "python": str(self.env_.python) if self.env_ else None,
            "python_source": self.env_.source if self.env_ else None,
            "version": self.env_.version if self.env_ else None,
            "version_endpoint": self.version_info,
            "model": self.model.facts() if self.model else None,
            "base_url": self.base_url or None,
            "pid": self.pid,
            "processes_at_start": [pid for pid, _ in self.processes],
            "startup_s": self.startup_s,
            "health_statuses_seen": self.health_statuses,
            "log_path": str(self.log_path) if self.log_path else None,
            "props": self.props(),
            "kv_served": self.served_kv(),
            "weights_bytes": weights_bytes(self.model.path) if self.model else None,
        }

    def served_kv(self) -> dict[str, Any] | None:
        """The knee's inputs (kvlab.memory.served): the checkpoint's shape, the KV dtype,
        max_num_seqs (vLLM-CPU's default when not set); the blocks come from /metrics.
        None without a readable config.json."""
        if self.model is None:
            return None
        try:
            config = read_config_json(self.model.path / "config.json")
            shape = shape_from_hf_dict(config, name=self.settings.model_name(),
                                       source=str(self.model.path / "config.json"))
        except (KvlabError, OSError):
            return None
        dtype: str = self.settings.dtype
        if dtype == "auto":
            dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
        return ServedKv(VllmSettings.kv_pool, shape, KV_DTYPES.get(dtype, "bf16"),
                        max_seqs=self.settings.max_num_seqs or VLLM_CPU_MAX_NUM_SEQS,
                        prefix_caching=self.settings.prefix_caching).to_dict()


# vLLM's --dtype (the KV cache's with --kv-cache-dtype auto) as kvlab.memory.dtypes names it
KV_DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}


def weights_bytes(folder: Path) -> int | None:
    """Bytes of a checkpoint's weight files (*.safetensors, else *.bin); None: none."""
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    return sum(f.stat().st_size for f in files) if files else None


def last_error_line(log_path: Path | None) -> str | None:
    """The log's last line that names an error (for a start-up failure's one line)."""
    for line in reversed(log_tail(log_path, 200).splitlines()):
        if "Error" in line or "error" in line:
            return line.strip()
    return None


__all__ = ["VllmServer", "VllmSettings", "descendants", "last_error_line", "start_ticks"]
