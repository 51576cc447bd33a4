"""The server's settings and shared state: one model, one context size, and either one
slot (requests serialized) or a continuous-batching scheduler over a paged KV pool."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvlab import __version__
from kvlab.errors import ConfigError
from kvlab.memory.shapes import ModelShape
from kvlab.serve.api_errors import exceed_context, invalid_request
from kvlab.serve.batching import BatchingSlot, BatchSettings
from kvlab.serve.generator import Generator
from kvlab.serve.params import GenParams, as_int
from kvlab.serve.response_store import ResponseStore
from kvlab.serve.slot import Slot
from kvlab.serve.source import resolve_source


@dataclass(frozen=True)
class ServeSettings:
    """What ``kvlab serve`` was started with.

    ``model`` (``gemma-3-270m`` or a GGUF path) replaces the toy ``preset`` when given;
    ``dtype`` is its weight format (float32, bfloat16 or int8:
    :mod:`kvlab.engine.weights`; the KV cache takes the activations' dtype). ``n_ctx``
    None means the model's ``max_len``. ``seed`` is the default sampling seed of requests
    that send none (llama.cpp's ``--seed``; -1 = random). ``api_key`` never appears in repr, logs or
    responses. ``slots`` > 1 or ``kv_blocks`` set: continuous batching of up to
    ``slots`` sequences over ``kv_blocks`` blocks of ``block_size`` tokens (default:
    as many blocks as ``slots`` contiguous contexts would take), prompts computed at
    most ``prefill_budget`` tokens per step, full KV blocks cached for later prompts
    unless ``prefix_cache`` is False.
    """

    preset: str = "toy"
    n_ctx: int | None = None
    use_cache: bool = True
    seed: int = 42
    threads: int = 2
    api_key: str | None = None
    weights_seed: int = 42
    model: str | None = None
    dtype: str = "float32"
    slots: int = 1
    kv_blocks: int | None = None
    block_size: int = 16
    prefill_budget: int = 256
    prefix_cache: bool = True

    @property
    def batching(self) -> bool:
        """Whether the continuous-batching scheduler serves (else one slot)."""
        return self.slots > 1 or self.kv_blocks is not None

    def batch_settings(self, n_ctx: int) -> BatchSettings:
        """The scheduler's limits, checked (ConfigError naming the option)."""
        for name, value in (("--slots", self.slots), ("--block-size", self.block_size),
                            ("--prefill-budget", self.prefill_budget),
                            ("--kv-blocks", 1 if self.kv_blocks is None else self.kv_blocks)):
            if value < 1:
                raise ConfigError(f"{name} must be >= 1, got {value}")
        if not self.use_cache:
            raise ConfigError("--no-cache serves one slot by recomputation; drop --slots "
                              "and --kv-blocks, or drop --no-cache")
        per_context = -(-n_ctx // self.block_size)
        return BatchSettings(max_running=self.slots,
                             n_blocks=(per_context * self.slots if self.kv_blocks is None
                                       else self.kv_blocks),
                             block_size=self.block_size, token_budget=self.prefill_budget,
                             prefix_caching=self.prefix_cache)

    def __repr__(self) -> str:
        key = "set" if self.api_key else "none"
        served = f"model={self.model!r}" if self.model else f"preset={self.preset!r}"
        return (f"ServeSettings({served}, n_ctx={self.n_ctx}, "
                f"use_cache={self.use_cache}, seed={self.seed}, threads={self.threads}, "
                f"api_key={key})")

    def resolved_n_ctx(self, max_len: int) -> int:
        """The context size in tokens, checked against the model's ``max_len``."""
        if self.n_ctx is None:
            return max_len
        if not 1 < self.n_ctx <= max_len:
            served = f"model {self.model!r}" if self.model else f"preset {self.preset!r}"
            raise ConfigError(
                f"--ctx-size {self.n_ctx} is out of range for {served}: "
                f"use 2..{max_len} (the model's max_len)"
            )
        return self.n_ctx


class ServerState:
    """Everything the handlers share: settings, the slot and the model's identity."""

    def __init__(self, settings: ServeSettings) -> None:
        if settings.threads < 1:
            raise ConfigError(f"--threads must be >= 1, got {settings.threads}")
        if settings.slots < 1:
            raise ConfigError(f"--slots must be >= 1, got {settings.slots}")
        self.settings = settings
        self.source = resolve_source(settings.preset, settings.model, settings.dtype,
                                     settings.weights_seed)
        self.n_ctx = settings.resolved_n_ctx(self.source.config.max_len)
        self.model_id = self.source.name
        self.slot: Generator  # the one slot, or continuous batching
        if settings.batching:
            self.slot = BatchingSlot(self.source, self.n_ctx, settings.threads,
                                     settings.batch_settings(self.n_ctx))
        else:
            self.slot = Slot(self.source, self.n_ctx, settings.use_cache, settings.threads)
        # Called on the loading thread if loading fails (kvlab serve: stop and exit).
        self.on_load_error: Callable[[], None] | None = None
        self.responses = ResponseStore()  # Responses' previous_response_id

    def prompt_ids(self, prompt: Any, field: str = "prompt") -> list[int]:
        """Token ids of a prompt given as a string (BOS added when the model has one,
        as llama-server does) or as an array of token ids (used as given)."""
        tokenizer = self.slot.tokenizer
        if isinstance(prompt, str):
            ids = tokenizer.encode(prompt)
        elif isinstance(prompt, list) and all(as_int(t) is not None for t in prompt):
            ids = [int(t) for t in prompt]
            if any(not 0 <= t < tokenizer.vocab_size for t in ids):
                raise invalid_request(
                    f"'{field}': token ids must be in 0..{tokenizer.vocab_size - 1}")
        elif prompt is None:
            raise invalid_request(f"'{field}' is required")
        else:
            raise invalid_request(
                f"'{field}' must be a string or an array of token ids (one prompt per request)")
        if not ids:
            raise invalid_request(f"'{field}' is empty")
        if len(ids) >= self.n_ctx:  # llama.cpp refuses a prompt that fills the slot
            raise exceed_context(len(ids), self.n_ctx)
        return ids

    def check_fits(self, prompt_ids: list[int], params: GenParams) -> None:
        """400 now, before a stream starts, for a request the generator can never hold."""
        self.slot.check_fits(prompt_ids, params)

    def props(self) -> dict[str, Any]:
        """The ``GET /props`` document (llama.cpp's keys plus a ``kvlab`` object)."""
        from kvlab.serve.params import DEFAULT_TEMPERATURE

        config = self.source.config
        path = str(self.source.path) if self.source.path else self.model_id
        return {
            "default_generation_settings": {
                "n_ctx": self.n_ctx,
                "params": {
                    "n_predict": -1,
                    "temperature": DEFAULT_TEMPERATURE,
                    "seed": self.settings.seed,
                    "ignore_eos": False,
                    "cache_prompt": True,
                },
            },
            "total_slots": self.settings.slots,
            "model_alias": self.model_id,
            "model_path": path,
            "modalities": {"vision": False, "audio": False},
            "chat_template": self.source.chat_template,
            "bos_token": self.slot.tokenizer.bos_text,
            "eos_token": self.slot.tokenizer.eos_text,
            "build_info": f"kvlab-{__version__}",
            "is_sleeping": False,
            "kvlab": {
                "preset": None if self.settings.model else self.settings.preset,
                "model": self.settings.model,
                "dtype": self.settings.dtype if self.settings.model else "float32",
                "kv_cache": self.settings.use_cache,
                "n_ctx": self.n_ctx,
                "max_len": config.max_len,
                **self.slot.concurrency(),
                "threads": self.settings.threads,
                "weights_seed": None if self.settings.model else self.settings.weights_seed,
                "default_seed": self.settings.seed,
                "eos_ids": list(self.slot.eos_ids),
                # what a run's knee and memory checks read (kvlab.memory.served)
                "kv_shape": kv_shape(config, self.model_id).to_dict(),
                "kv_dtype": kv_dtype(self.settings.dtype if self.settings.model else "float32"),
                "weights_bytes": resident_bytes(self.slot.model),
            },
        }

    def model_meta(self) -> dict[str, Any]:
        """``meta`` of the ``/v1/models`` entry (llama.cpp's keys)."""
        config = self.source.config
        model = self.slot.model
        return {
            "vocab_type": self.source.vocab_type,
            "n_vocab": config.vocab_size,
            "n_ctx": self.n_ctx,
            "n_ctx_train": config.max_len,
            "n_embd": config.d_model,
            "n_params": model.num_parameters() if model is not None else 0,
        }


def kv_shape(config: Any, name: str) -> ModelShape:
    """The KV geometry of an engine config (the toy's or Gemma's): heads, widths and
    sliding windows per layer."""
    windows = config.layer_windows
    return ModelShape(
        name=name, n_layers=config.n_layers, n_heads=config.n_heads,
        kv_heads=(config.n_kv_heads,) * config.n_layers, head_dim_k=config.head_dim,
        head_dim_v=config.head_dim, is_swa=tuple(w is not None for w in windows),
        n_swa=next((w for w in windows if w is not None), 0), d_model=config.d_model,
        n_ctx_train=config.max_len, source="kvlab serve")


def kv_dtype(weights: str) -> str:
    """The KV cache's element type (kvlab.memory.dtypes) for a weight format: the
    activations' (bf16 for bfloat16, f32 otherwise)."""
    return "bf16" if weights == "bfloat16" else "f32"


def resident_bytes(model: Any) -> int | None:
    """Bytes of the model's weights as served: its parameters and buffers, each storage
    counted once (tied matrices share one), and the matrices a serving format packed
    outside them (bfloat16's oneDNN layout, int8); None before the model is loaded."""
    if model is None:
        return None
    from kvlab.engine.weights import Int8Linear, PackedLinear

    seen: dict[int, int] = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    packed = sum(m.weight_nbytes for m in model.modules()
                 if isinstance(m, (PackedLinear, Int8Linear)))
    return sum(seen.values()) + packed
