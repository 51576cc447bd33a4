"""Gemma 3 weights from a GGUF file, read and dequantized by the ``gguf`` package.

``gguf.GGUFReader`` maps the file and lists its tensors; ``gguf.dequantize`` turns each
one (F32, Q8_0, Q5_0, Q4_K, Q6_K, ...) into float32 numpy values; they are then cast
to the requested torch dtype. No dequantization code lives here.

One conversion is ours: llama.cpp's converter stores Gemma's norm weights as
``1 + w`` (so its RMSNorm is a plain product); the engine keeps Gemma's own form
``x * (1 + w)``, as Transformers does, so 1 is subtracted on load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from kvlab.engine.gemma import Gemma3
from kvlab.engine.gemma_config import GemmaConfig, read_gemma_config
from kvlab.errors import ConfigError, ModelFileError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

# GGUF tensor name inside block i -> the engine's parameter name inside blocks.i
_BLOCK_NAMES = {
    "attn_norm": "pre_attn_norm",
    "attn_q": "attn.q",
    "attn_k": "attn.k",
    "attn_v": "attn.v",
    "attn_output": "attn.o",
    "attn_q_norm": "attn.q_norm",
    "attn_k_norm": "attn.k_norm",
    "post_attention_norm": "post_attn_norm",
    "ffn_norm": "pre_mlp_norm",
    "ffn_gate": "mlp.gate",
    "ffn_up": "mlp.up",
    "ffn_down": "mlp.down",
    "post_ffw_norm": "post_mlp_norm",
}


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype called ``name`` ("float32" or "bfloat16"); ConfigError otherwise."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ConfigError(
            f"unknown dtype {name!r}; choose one of: {', '.join(DTYPES)}"
        ) from None


def engine_name(gguf_name: str) -> str | None:
    """The engine's parameter name for a GGUF tensor name; None when it has none."""
    if gguf_name == "token_embd.weight":
        return "embed.weight"
    if gguf_name == "output_norm.weight":
        return "norm.weight"
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight":
        inner = _BLOCK_NAMES.get(parts[2])
        if inner is not None:
            return f"blocks.{parts[1]}.{inner}.weight"
    return None


def _open(path: Path) -> Any:
    from gguf import GGUFReader

    try:
        return GGUFReader(path)
    except (OSError, ValueError, IndexError, KeyError, EOFError) as exc:
        raise ModelFileError(
            f"GGUF file {str(path)!r} is truncated or corrupt ({type(exc).__name__}: "
            f"{str(exc)[:120]}); fetch it again (kvlab fetch)"
        ) from None


def read_state_dict(path: str | Path, dtype: torch.dtype = torch.float32
                    ) -> dict[str, torch.Tensor]:
    """Every GGUF tensor under the engine's parameter name, dequantized to ``dtype``.

    ModelFileError for a tensor the engine does not know (an untied output head, for
    instance) or a file the reader cannot parse.
    """
    from gguf import dequantize

    p = Path(path)
    reader = _open(p)
    state: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        name = engine_name(tensor.name)
        if name is None:
            raise ModelFileError(
                f"GGUF file {str(p)!r} has tensor {tensor.name!r}, which the Gemma 3 "
                f"engine does not know; only tied-head Gemma 3 text models are supported"
            )
        try:
            values = dequantize(tensor.data, tensor.tensor_type)  # float32, (rows, cols)
        except (NotImplementedError, ValueError) as exc:
            raise ModelFileError(
                f"GGUF file {str(p)!r}: cannot dequantize {tensor.name} "
                f"({tensor.tensor_type.name}): {exc}"
            ) from None
        # A copy into torch's own (64-byte aligned) memory: numpy's large buffers are
        # only 16-byte aligned, which BLAS kernels may run slower on.
        weight = torch.tensor(np.ascontiguousarray(values, dtype=np.float32))
        if name.endswith("norm.weight"):
            weight = weight - 1.0  # the file stores 1 + w
        state[name] = weight.to(dtype)
    return state


def load_gemma(path: str | Path, dtype: torch.dtype = torch.float32) -> Gemma3:
    """The Gemma 3 model stored in the GGUF file at ``path``, in eval mode.

    The shape comes from the metadata (:func:`read_gemma_config`), the vocabulary size
    from the embedding table. ModelFileError names the file on any mismatch.
    """
    config = read_gemma_config(path)
    state = read_state_dict(path, dtype)
    embed = state.get("embed.weight")
    if embed is None:
        raise ModelFileError(f"GGUF file {str(path)!r} has no token_embd.weight tensor")
    config = GemmaConfig(**{**config.__dict__, "vocab_size": int(embed.shape[0])})
    with torch.device("meta"):
        model = Gemma3(config)
    expected = {name: tuple(p.shape) for name, p in model.named_parameters()}
    missing = sorted(set(expected) - set(state))
    wrong = [n for n, t in state.items() if tuple(t.shape) != expected.get(n)]
    if missing or wrong:
        raise ModelFileError(
            f"GGUF file {str(path)!r} does not match a Gemma 3 of its own metadata: "
            f"missing {missing[:3]}, wrong shape {wrong[:3]}"
        )
    model.load_state_dict(state, assign=True, strict=False)
    model.head.weight = model.embed.weight  # assign replaced the tied parameter: tie again
    model.positions = torch.arange(config.max_len)  # the buffer was built on meta
    model.eval()
    model.requires_grad_(False)
    return model
