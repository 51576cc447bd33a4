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


@dataclass(frozen=True)
class Gap:
    """A reference row's top-1 logit minus its top-2, and the gap rounding can close."""

    margin: float
    bound: float  # 2 x the rounding bound: each of the two logits may move by one

    @property
    def near(self) -> bool:
        """A near tie: rounding alone may put either token first, so either is the
        reference's answer."""
        return self.margin <= self.bound


def top2_gap(reference: torch.Tensor, config: ChainShape, n_keys: int) -> Gap:
    """The near-tie rule, for one float32 row of logits (V,) of a model of shape
    ``config`` that read at most ``n_keys`` keys."""
    top2 = reference.float().topk(2).values
    return Gap(float(top2[0] - top2[1]), 2 * rounding_bound(reference, config, n_keys))


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
            tie = top2_gap(ref_logits[step], config, n_keys)
            assert tie.near, (
                f"step {step}: token {token} vs {ref_token}, but the reference's top-2 "
                f"margin {tie.margin:.3g} is beyond what rounding explains "
                f"({tie.bound:.3g})")
            return


def assert_no_near_tie(model: LanguageModel, prompt: list[int], n_new: int) -> None:
    """Fail if any step of the greedy generation of ``prompt`` is a near tie: top two
    logits closer than rounding can move them. Only without one must two evaluations
    that round differently (served cached vs naive, batched vs alone) pick the same
    tokens; tests that compare served tokens exactly check this first."""
    out = generate(model, prompt, n_new, keep_logits=True)
    assert out.logits is not None
    for step, row in enumerate(out.logits):
        tie = top2_gap(row, model.config, len(prompt) + n_new)
        assert not tie.near, (
            f"step {step} of this prompt is a near tie (top-2 margin {tie.margin:.3g} <= "
            f"{tie.bound:.3g}): choose another prompt for an exact token comparison")
