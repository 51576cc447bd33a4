"""The engine against Hugging Face Transformers' Gemma 3, loaded from the same GGUF.

Transformers reads the GGUF with the same ``gguf`` package and dequantizes every
tensor to float32, so both models hold the same weights; what is compared is the
computation. :func:`compare_logits` runs each prompt through both in one full pass
and reports the largest absolute difference over every position and vocabulary entry,
held to the rounding bound of :mod:`kvlab.engine.rounding`: the two implementations
do the same float32 arithmetic in other orders.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from kvlab.engine.lm import LanguageModel
from kvlab.engine.rounding import rounding_bound
from kvlab.errors import ConfigError


def reference_prompts() -> dict[str, str]:
    """Named prompts of different kinds; ``long`` is over 512 tokens (the window)."""
    from kvlab.bench.plan.workload import padding_text

    return {
        "plain": "The capital of France is",
        "code": "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
        "multilingual": "Le chat dort. 猫が寝ている。 Die Katze schläft. 🐈",
        "chat": "<start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n"
                "<start_of_turn>model\n",
        "long": padding_text()[:2400] + "\n\nSummarise the text above in one sentence.",
    }


def load_transformers_gemma(path: str | Path, dtype: torch.dtype = torch.float32) -> Any:
    """Transformers' Gemma 3 (``Gemma3ForCausalLM``) from the GGUF at ``path``.

    Needs ``transformers`` and ``accelerate`` (kvlab's engine extra); the Hub is never
    asked (HF_HUB_OFFLINE).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from transformers import AutoModelForCausalLM
    except ImportError as exc:
        raise ConfigError(f"the Transformers reference needs: pip install 'kvlab[engine]' "
                          f"({exc})") from None
    p = Path(path)
    model = AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, dtype=dtype)
    model.eval()
    return model


@dataclass
class LogitComparison:
    """One prompt through both models."""

    name: str
    tokens: int  # prompt length, BOS included
    max_abs_diff: float  # over every position and vocabulary entry
    argmax_agreement: float  # fraction of positions whose top-1 token is the same
    tolerance: float  # max |diff| rounding explains (kvlab.engine.rounding)

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.tolerance

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"ok": self.ok}


def compare_logits(
    engine: LanguageModel, reference: Any, prompts: dict[str, list[int]]
) -> list[LogitComparison]:
    """Full-pass logits of ``engine`` and ``reference`` on each tokenized prompt."""
    results = []
    for name, ids in prompts.items():
        batch = torch.tensor([ids], dtype=torch.long)  # (1, T)
        with torch.inference_mode():
            ours = engine(batch)[0].float()  # (T, V)
            theirs = reference(batch).logits[0].float()  # (T, V)
        results.append(LogitComparison(
            name=name,
            tokens=len(ids),
            max_abs_diff=float((ours - theirs).abs().max()),
            argmax_agreement=float((ours.argmax(-1) == theirs.argmax(-1)).float().mean()),
            tolerance=rounding_bound(theirs, engine.config, len(ids)),
        ))
        del ours, theirs
    return results


def transformers_forced_logits(reference: Any, ids: list[int], forced: list[int]
                               ) -> torch.Tensor:
    """Transformers' logits (n, V) at each of ``n = len(forced)`` steps, step i seeing
    ``ids`` and ``forced[:i]``: one full pass over ``ids + forced[:-1]``, float32."""
    batch = torch.tensor([ids + forced[:-1]], dtype=torch.long)  # (1, T)
    with torch.inference_mode():
        out = reference(batch, logits_to_keep=len(forced))  # the last n positions
    return out.logits[0].float()  # (n, V)
