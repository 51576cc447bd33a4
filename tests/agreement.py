"""Teacher-forced top-1 agreement with kvlab's float32 engine, on one fixed prompt set,
for every served form of Gemma 3 270M (the engine's weight formats in
tests/engine/test_weights_gemma.py; vLLM on the checkpoint kvlab converts in
tests/servers/test_vllm_live.py).

Each form reads the same token ids, and at every position its top-1 next token is
compared with float32's. Where the two differ, the position counts as a disagreement
only outside the near-tie rule of tests/rounding.py (:func:`tests.rounding.top2_gap`):
when float32's own top two logits are closer than rounding can move them, either token
is float32's answer, and the position is excused.

Each count is recorded (``AGREEMENTS``); ``tests/conftest.py`` prints them as a table at
the end of the session, under the kernel set torch picked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from kvlab.bench.plan.workload import padding_text
from kvlab.engine.gguf_tokenizer import GGUFTokenizer
from kvlab.engine.rounding import ChainShape
from tests.rounding import _current_test, top2_gap

# The first paragraphs of the workload's padding text: real prose, 52 to 56 tokens
# each with BOS. Few and short, since the numerics tests rerun under every kernel set;
# KVLAB_AGREEMENT_PROMPTS=N measures on the first N (up to 210) for the docs' figures.
N_PROMPTS = int(os.environ.get("KVLAB_AGREEMENT_PROMPTS", "4"))


def prompt_set(tokenizer: GGUFTokenizer) -> list[list[int]]:
    """The fixed prompts as token ids (BOS first), from the GGUF's tokenizer."""
    paragraphs = padding_text().split("\n\n")[:N_PROMPTS]
    return [tokenizer.encode(p) for p in paragraphs]


def teacher_forced_logits(model: torch.nn.Module, prompts: list[list[int]]
                          ) -> list[torch.Tensor]:
    """Logits (T, V) of each prompt read in one pass: row i predicts token i + 1."""
    with torch.inference_mode():
        return [model(torch.tensor([ids]))[0].float() for ids in prompts]


@dataclass
class Agreement:
    """One form's top-1 against float32's over a prompt set."""

    name: str
    positions: int = 0
    agree: int = 0  # the same top-1 token
    near_ties: int = 0  # a different token where float32's top two are a near tie

    @property
    def disagree(self) -> int:
        """Positions that count against the form: a different token, no near tie."""
        return self.positions - self.agree - self.near_ties

    @property
    def rate(self) -> float:
        """Share of positions not counted as a disagreement."""
        return 1 - self.disagree / self.positions if self.positions else 0.0

    def add(self, top1: torch.Tensor, reference: torch.Tensor, config: ChainShape,
            n_keys: int) -> None:
        """Count one prompt: ``top1`` (n,) the form's token at each position, and
        ``reference`` (n, V) float32's logits there, of a model of shape ``config``
        that read at most ``n_keys`` keys."""
        assert top1.shape == reference.shape[:1], f"{top1.shape} vs {reference.shape}"
        ours = reference.argmax(-1)  # (n,)
        for i in range(top1.shape[0]):
            self.positions += 1
            if int(top1[i]) == int(ours[i]):
                self.agree += 1
            elif top2_gap(reference[i], config, n_keys).near:
                self.near_ties += 1

    def line(self) -> str:
        return (f"{self.positions} positions, {self.agree} agree, {self.near_ties} near "
                f"ties excused, {self.disagree} disagree: {self.rate:.1%}")


@dataclass(frozen=True)
class Held:
    """One agreement and the floor a test held it to."""

    test: str
    agreement: Agreement
    floor: float


AGREEMENTS: list[Held] = []


def hold_to_floor(agreement: Agreement, floor: float) -> None:
    """Record ``agreement`` for the session's table, and fail when it is below ``floor``."""
    assert agreement.positions > 0, f"{agreement.name}: no position compared"
    AGREEMENTS.append(Held(_current_test(), agreement, floor))
    assert agreement.rate >= floor, (
        f"{agreement.name}: top-1 agreement with float32 {agreement.line()}, below its "
        f"floor {floor:.0%}")
