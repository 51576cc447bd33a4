"""Equality up to rounding, for every test that compares two float32 computations of
the same logits (cached vs naive, batched vs alone, paged vs contiguous, chunked vs
whole). The bound and its reasoning are in :mod:`kvlab.engine.rounding`; this helper
applies it and keeps what it saw.

Each check is recorded (test, largest difference, bound); ``tests/conftest.py`` prints
the worst per test at the end of the session, under the kernel set torch picked, and
writes them as JSON when ``KVLAB_ROUNDING_REPORT`` names a file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from kvlab.engine.generate import generate
from kvlab.engine.lm import LanguageModel
from kvlab.engine.rounding import ChainShape, rounding_bound


@dataclass(frozen=True)
class Margin:
    """One check: the largest |difference| seen and the bound it was held to."""

    test: str
    delta: float
    bound: float


MARGINS: list[Margin] = []


def _current_test() -> str:
    return os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]


def hold_to_bound(delta: float, bound: float, what: str = "logits", label: str = ""
                  ) -> float:
    """Record ``delta`` against ``bound`` for the session's summary (under the test's
    name, plus ``label`` if given), and fail when it is over; returns ``delta``."""
    MARGINS.append(Margin(_current_test() + (f" [{label}]" if label else ""), delta, bound))
    assert delta <= bound, (f"{what}: max |Δ| {delta:.3g} exceeds the rounding bound "
                            f"{bound:.3g} (kvlab.engine.rounding)")
    return delta


def assert_close_up_to_rounding(actual: torch.Tensor, expected: torch.Tensor,
                                config: ChainShape, n_keys: int, what: str = "logits"
                                ) -> float:
    """Fail unless every |actual - expected| is within the rounding bound of a model of
    shape ``config`` reading at most ``n_keys`` keys; returns the largest difference."""
    assert actual.shape == expected.shape, f"{what}: {actual.shape} vs {expected.shape}"
    delta = float((actual.float() - expected.float()).abs().max())
    return hold_to_bound(delta, rounding_bound(expected, config, n_keys), what)


def assert_same_generation(tokens: list[int], logits: torch.Tensor, ref_tokens: list[int],
                           ref_logits: torch.Tensor, config: ChainShape, n_keys: int) -> None:
    """Greedy generations equal up to rounding: the same logits step by step, and the
    same tokens, except where the reference's top two logits are so close that the
    bound allows either order (a near tie). The comparison stops there, since the two
    sequences then continue from different tokens."""
    assert len(tokens) == len(ref_tokens), f"{len(tokens)} tokens vs {len(ref_tokens)}"
    for step, (token, ref_token) in enumerate(zip(tokens, ref_tokens, strict=True)):
        assert_close_up_to_rounding(logits[step], ref_logits[step], config, n_keys,
                                    what=f"logits at step {step}")
        if token != ref_token:
            top2 = ref_logits[step].float().topk(2).values
            margin = float(top2[0] - top2[1])
            bound = rounding_bound(ref_logits[step], config, n_keys)
            assert margin <= 2 * bound, (
                f"step {step}: token {token} vs {ref_token}, but the reference's top-2 "
                f"margin {margin:.3g} is beyond what rounding explains ({2 * bound:.3g})")
            return


def assert_no_near_tie(model: LanguageModel, prompt: list[int], n_new: int) -> None:
    """Fail if any step of the greedy generation of ``prompt`` is a near tie: top two
    logits closer than rounding can move them. Only without one must two evaluations
    that round differently (served cached vs naive, batched vs alone) pick the same
    tokens; tests that compare served tokens exactly check this first."""
    out = generate(model, prompt, n_new, keep_logits=True)
    assert out.logits is not None
    for step, row in enumerate(out.logits):
        top2 = row.float().topk(2).values
        margin = float(top2[0] - top2[1])
        bound = rounding_bound(row, model.config, len(prompt) + n_new)
        assert margin > 2 * bound, (
            f"step {step} of this prompt is a near tie (top-2 margin {margin:.3g} <= "
            f"{2 * bound:.3g}): choose another prompt for an exact token comparison")
