"""Request bodies -> typed generation parameters, with llama.cpp's field rules.

Field names, aliases and defaults follow llama-server's ``/completion`` schema:
``n_predict`` (aliases ``max_completion_tokens``, ``max_tokens``; the first present
wins, in that order; -1 = until the context is full), ``temperature`` (default 0.8,
clamped to >= 0; below :data:`GREEDY_BELOW`, 0 included, decoding is greedy: argmax,
as llama.cpp does for 0 — dividing logits by a tinier temperature overflows),
``seed`` (-1 = random), ``ignore_eos`` (default false),
``cache_prompt`` (default true), ``stream``, ``stream_options.include_usage``.
A ``null`` value means "use the default"; unknown fields are ignored; a field with
the wrong type is a 400 ``Field 'x': ...`` (an integer may be written ``5.0``, as JSON
Schema allows; ``stream_options.include_usage`` must be a boolean). Sampling is plain
temperature sampling: ``top_k``, ``top_p``, ``min_p`` and the other samplers are
accepted and ignored.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Any

from kvlab.serve.api_errors import invalid_request

DEFAULT_TEMPERATURE = 0.8  # llama.cpp's default; the benchmark harness always sends 0
GREEDY_BELOW = 1e-6  # temperatures under this are greedy (0 included); see the module doc
RANDOM_SEEDS = (-1, 0xFFFFFFFF)  # llama.cpp: -1 (or its uint32 form) = a random seed


@dataclass(frozen=True)
class GenParams:
    """What one request asks the slot to do. ``n_predict`` -1 = until the context is full."""

    n_predict: int
    temperature: float
    seed: int
    ignore_eos: bool
    cache_prompt: bool
    stream: bool
    include_usage: bool

    def settings(self) -> dict[str, Any]:
        """The ``generation_settings`` subset echoed in responses."""
        out = asdict(self)
        out.pop("include_usage")
        out["max_tokens"] = self.n_predict
        return out


def as_int(value: Any) -> int | None:
    """``value`` as an integer: an int, or a float with no fraction (JSON has one number
    type: ``5.0`` is the integer 5, as JSON Schema and llama.cpp read it); else None
    (booleans included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _field(body: dict[str, Any], name: str, kinds: tuple[type, ...], what: str) -> Any:
    """``body[name]`` if present and not null, checked against ``kinds``; else None."""
    value = body.get(name)
    if value is None:
        return None
    if kinds == (int,) and as_int(value) is not None:
        return as_int(value)
    # bool is an int subclass: refuse true/false where a number is expected.
    if isinstance(value, bool) and bool not in kinds:
        raise invalid_request(f"Field '{name}': expected {what}, got {value!r}")
    if not isinstance(value, kinds):
        raise invalid_request(f"Field '{name}': expected {what}, got {value!r}")
    return value


def parse_gen_params(body: dict[str, Any], default_seed: int) -> GenParams:
    """Read the generation fields of a llama.cpp or OpenAI request body."""
    given: dict[str, int] = {}  # every alias present is checked; the first present wins
    for name in ("n_predict", "max_completion_tokens", "max_tokens"):
        value = _field(body, name, (int,), "an integer")
        if value is not None and value < -1:
            raise invalid_request(f"Field '{name}': must be >= -1, got {value}")
        if value is not None:
            given.setdefault("n", value)
    n_predict = given.get("n", -1)

    temperature = _field(body, "temperature", (int, float), "a number")
    temperature = DEFAULT_TEMPERATURE if temperature is None else _temperature(temperature)

    seed = _field(body, "seed", (int,), "an integer")
    seed = default_seed if seed is None else seed
    if seed in RANDOM_SEEDS:
        seed = random.randrange(2**32)
    if not 0 <= seed < 2**32:
        raise invalid_request(f"Field 'seed': must be -1 or in 0..4294967295, got {seed}")

    ignore_eos = _field(body, "ignore_eos", (bool,), "a boolean")
    cache_prompt = _field(body, "cache_prompt", (bool,), "a boolean")
    stream = _field(body, "stream", (bool,), "a boolean")
    options = _field(body, "stream_options", (dict,), "an object") or {}
    include_usage = _field(options, "include_usage", (bool,), "a boolean")
    return GenParams(
        n_predict=n_predict,
        temperature=temperature,
        seed=seed,
        ignore_eos=bool(ignore_eos),
        cache_prompt=True if cache_prompt is None else cache_prompt,
        stream=bool(stream),
        include_usage=bool(include_usage),
    )


def _temperature(value: float) -> float:
    """A finite temperature >= 0; 0.0 (greedy) below :data:`GREEDY_BELOW`."""
    try:
        temperature = float(value)
    except OverflowError:  # an integer too large for a double
        temperature = math.inf
    if not math.isfinite(temperature):
        raise invalid_request(f"Field 'temperature': expected a finite number, got {value!r}")
    return 0.0 if temperature < GREEDY_BELOW else temperature
