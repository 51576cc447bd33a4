"""Prefill and decode speed of the engine, Transformers and llama-server, side by side.

One run, same machine, same thread count, same prompt ids (the workload's padding
text, cut to each context), same number of new tokens. Per context and runner:

- prefill tokens/s: prompt tokens / time to the first new token (one pass over the
  prompt);
- decode tokens/s: (new tokens - 1) / (time of the last - time of the first), i.e. the
  cached one-token steps after the prefill.

The engine and Transformers run in this process on the same float32 weights; llama-server
(Q4_K_M weights, f16 KV cache, its own kernels) reports its own ``timings``
(``prompt_per_second``, ``predicted_per_second``), which count the same two things.
Medians over ``repeats`` runs after one warm-up per runner.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import torch

from kvlab.engine.generate import iter_generate
from kvlab.engine.lm import new_cache
from kvlab.errors import EndpointProtocolError

RUNNERS = ("engine", "transformers", "llama-server")


@dataclass
class Speed:
    """One runner at one context: medians of the repeats (tokens per second)."""

    runner: str
    context: int
    new_tokens: int
    prefill_tokens_per_s: float
    decode_tokens_per_s: float


def _rates(prompt_tokens: int, new_tokens: int, first_s: float, last_s: float
           ) -> tuple[float, float]:
    """(prefill, decode) tokens/s from the first and last token's time after the call."""
    return prompt_tokens / first_s, (new_tokens - 1) / (last_s - first_s)


def time_engine(model: Any, ids: list[int], new_tokens: int) -> tuple[float, float]:
    """The engine's cached greedy generation: (prefill, decode) tokens/s."""
    cache = new_cache(model, len(ids) + new_tokens - 1)  # allocated before the clock
    start = time.perf_counter()
    stamps = [time.perf_counter() - start for _ in iter_generate(model, ids, new_tokens,
                                                                 cache=cache)]
    return _rates(len(ids), new_tokens, stamps[0], stamps[-1])


def time_transformers(model: Any, ids: list[int], new_tokens: int) -> tuple[float, float]:
    """Transformers' forward with its own KV cache, greedy, one token per step."""
    stamps = []
    start = time.perf_counter()
    with torch.inference_mode():
        out = model(torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        token = out.logits[0, -1].argmax()
        stamps.append(time.perf_counter() - start)
        past = out.past_key_values
        for _ in range(new_tokens - 1):
            out = model(token.view(1, 1), past_key_values=past, use_cache=True)
            past = out.past_key_values
            token = out.logits[0, -1].argmax()
            stamps.append(time.perf_counter() - start)
    return _rates(len(ids), new_tokens, stamps[0], stamps[-1])


def time_llama_server(base_url: str, ids: list[int], new_tokens: int) -> tuple[float, float]:
    """llama-server's own timings for one /completion (no prompt cache, EOS ignored)."""
    body = {"prompt": ids, "n_predict": new_tokens, "temperature": 0.0, "ignore_eos": True,
            "cache_prompt": False}
    try:
        response = httpx.post(f"{base_url}/completion", json=body, timeout=600.0)
        response.raise_for_status()
        timings = response.json()["timings"]
        return float(timings["prompt_per_second"]), float(timings["predicted_per_second"])
    except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
        raise EndpointProtocolError(f"{base_url}/completion failed: {exc}") from None


def measure(
    runners: dict[str, Callable[[list[int], int], tuple[float, float]]],
    prompts: dict[int, list[int]], new_tokens: int, repeats: int,
    on_step: Callable[[str], None] | None = None,
) -> list[Speed]:
    """Each runner on each prompt: one warm-up, then ``repeats`` timed runs, alternating
    runners within a repeat so a drift in machine load hits them alike."""
    step = on_step or (lambda label: None)
    shortest = prompts[min(prompts)]
    for name, run in runners.items():
        run(shortest, new_tokens)
        step(f"warm-up {name}")
    results = []
    for context, ids in prompts.items():
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
        for _ in range(repeats):
            for name, run in runners.items():
                samples[name].append(run(ids, new_tokens))
                step(f"{name} @ {context}")
        for name, rates in samples.items():
            results.append(Speed(name, context, new_tokens,
                                 statistics.median(r[0] for r in rates),
                                 statistics.median(r[1] for r in rates)))
    return results


def ratios(results: list[Speed]) -> list[dict[str, Any]]:
    """Per context: the engine's decode and prefill rates over each other runner's."""
    by = {(s.runner, s.context): s for s in results}
    rows = []
    for context in sorted({s.context for s in results}):
        engine = by.get(("engine", context))
        if engine is None:
            continue
        for other in ("transformers", "llama-server"):
            them = by.get((other, context))
            if them is not None:
                rows.append({
                    "context": context, "versus": other,
                    "decode_ratio": engine.decode_tokens_per_s / them.decode_tokens_per_s,
                    "prefill_ratio": engine.prefill_tokens_per_s / them.prefill_tokens_per_s,
                })
    return rows


def to_dict(results: list[Speed], settings: dict[str, Any]) -> dict[str, Any]:
    """The results, their ratios and the settings, as plain data."""
    return {"settings": settings, "results": [asdict(s) for s in results],
            "ratios": ratios(results)}
