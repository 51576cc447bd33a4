"""Token lengths drawn from a named distribution (the ``random`` dataset kind's ``input``
and ``output`` tables), reproducibly from a seed.

- ``fixed``: ``value`` every time.
- ``uniform``: a whole number from ``min`` to ``max``, both included.
- ``normal``: ``mean`` and standard deviation ``std``, rounded.
- ``lognormal``: a log-normal whose lengths have ``mean`` and ``std`` (its parameters
  are ``σ² = ln(1 + std²/mean²)`` and ``μ = ln(mean) − σ²/2``), rounded: a long tail
  of long requests, as real traffic has.

``normal`` and ``lognormal`` draws are clipped to ``min`` (default 1) and ``max``
(default none). All lengths are tokens.
"""

from __future__ import annotations

import math
import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Distribution = Literal["fixed", "uniform", "normal", "lognormal"]


class Lengths(BaseModel):
    """A distribution of token lengths; which fields it needs depends on its kind."""

    model_config = ConfigDict(extra="forbid")

    distribution: Distribution = "fixed"
    value: int | None = Field(default=None, ge=1)  # fixed
    min: int | None = Field(default=None, ge=1)  # uniform; a floor for the others
    max: int | None = Field(default=None, ge=1)  # uniform; a ceiling for the others
    mean: float | None = Field(default=None, gt=0)  # normal, lognormal
    std: float | None = Field(default=None, ge=0)  # normal, lognormal

    @model_validator(mode="after")
    def _complete(self) -> Lengths:
        needs = {"fixed": ("value",), "uniform": ("min", "max"),
                 "normal": ("mean", "std"), "lognormal": ("mean", "std")}[self.distribution]
        missing = [k for k in needs if getattr(self, k) is None]
        if missing:
            raise ValueError(f"a {self.distribution} distribution needs "
                             f"{' and '.join(missing)}")
        extra = [k for k in ("value", "mean", "std") if k not in needs
                 and getattr(self, k) is not None]
        if extra:
            raise ValueError(f"{', '.join(extra)}: not a parameter of a {self.distribution} "
                             "distribution")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def draw(self, rng: random.Random, n: int) -> list[int]:
        """``n`` lengths (tokens) drawn with ``rng``."""
        if self.distribution == "fixed":
            assert self.value is not None
            return [self.value] * n
        if self.distribution == "uniform":
            assert self.min is not None and self.max is not None
            return [rng.randint(self.min, self.max) for _ in range(n)]
        assert self.mean is not None and self.std is not None
        if self.distribution == "normal":
            return [self._clip(rng.gauss(self.mean, self.std)) for _ in range(n)]
        sigma2 = math.log(1.0 + (self.std / self.mean) ** 2)
        mu = math.log(self.mean) - sigma2 / 2.0
        return [self._clip(rng.lognormvariate(mu, math.sqrt(sigma2))) for _ in range(n)]

    def _clip(self, x: float) -> int:
        low = self.min if self.min is not None else 1
        value = max(low, round(x))
        return value if self.max is None else min(self.max, value)

    def describe(self) -> str:
        """The distribution in a few words, e.g. ``uniform 64..256``."""
        if self.distribution == "fixed":
            return f"fixed {self.value}"
        if self.distribution == "uniform":
            return f"uniform {self.min}..{self.max}"
        bounds = ""
        if self.min is not None or self.max is not None:
            bounds = f", clipped to {self.min or 1}..{self.max or '∞'}"
        return f"{self.distribution} mean {self.mean:g} std {self.std:g}{bounds}"
