"""kv-bench: naive vs cached generation timed across context lengths.

Each run records raw facts only: the ``perf_counter_ns`` offset of every generated
token from the call. Metrics are pure functions of those offsets:

- prefill: time to the first token. For the cached path, its single pass over the
  prompt; for the naive path, its first full pass (the same work).
- decode per token: (last - first) / (N - 1), the inter-token time excluding prefill.
- total: time to the last token, prompt processing included.

Speedups are naive / cached at the same context. The total speedup cannot exceed
about N: the cached path still pays one full pass over the prompt, while the naive one
pays N. The per-token decode speedup is the one that grows with the context.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from kvlab.engine.cache import KVCache
from kvlab.engine.config import get_preset
from kvlab.engine.generate import check_request, iter_generate
from kvlab.engine.lm import LanguageModel, new_cache
from kvlab.engine.model import build_model
from kvlab.errors import ConfigError

DEFAULT_CONTEXTS = (32, 64, 128, 256, 512, 1024, 2048, 4096)
PATHS = ("naive", "cached")


@dataclass(frozen=True)
class BenchSettings:
    """What kv-bench measures; validated on creation."""

    preset: str = "toy"
    contexts: tuple[int, ...] = DEFAULT_CONTEXTS
    new_tokens: int = 16
    repeats: int = 3
    threads: int = 2
    seed: int = 42
    warmup: bool = True
    model: str | None = None  # a real model (gemma-3-270m) instead of the preset

    def __post_init__(self) -> None:
        if any(c <= 0 for c in self.contexts) or not self.contexts:
            raise ConfigError(f"context lengths must be positive, got {list(self.contexts)}")
        if self.new_tokens < 2:
            raise ConfigError(
                f"new_tokens must be at least 2 (decode time is measured between the "
                f"first and last token), got {self.new_tokens}"
            )
        if self.repeats <= 0 or self.threads <= 0:
            raise ConfigError(
                f"repeats and threads must be positive, got repeats={self.repeats}, "
                f"threads={self.threads}"
            )
        if self.model is None:
            get_preset(self.preset)

    @property
    def label(self) -> str:
        """The model's name: the real model if any, else the preset."""
        return self.model or self.preset

    def steps(self) -> int:
        """Generation runs the benchmark will make (for a progress bar)."""
        return len(self.contexts) * self.repeats * len(PATHS) + (2 if self.warmup else 0)


@dataclass
class Run:
    """One timed generation: token arrival offsets in ns from the call."""

    path: str
    context: int
    repeat: int
    token_ns: list[int]

    @property
    def prefill_s(self) -> float:
        return self.token_ns[0] / 1e9

    @property
    def decode_s_per_token(self) -> float:
        return (self.token_ns[-1] - self.token_ns[0]) / (len(self.token_ns) - 1) / 1e9

    @property
    def total_s(self) -> float:
        return self.token_ns[-1] / 1e9


@dataclass
class PathStats:
    """Medians over the repeats of one path at one context (seconds)."""

    prefill_s: float
    decode_s_per_token: float
    total_s: float

    @classmethod
    def of(cls, runs: list[Run]) -> PathStats:
        return cls(
            prefill_s=statistics.median(r.prefill_s for r in runs),
            decode_s_per_token=statistics.median(r.decode_s_per_token for r in runs),
            total_s=statistics.median(r.total_s for r in runs),
        )


@dataclass
class ContextRow:
    """Both paths at one context, and their ratios (naive / cached)."""

    context: int
    naive: PathStats
    cached: PathStats

    @property
    def decode_speedup(self) -> float:
        return self.naive.decode_s_per_token / self.cached.decode_s_per_token

    @property
    def total_speedup(self) -> float:
        return self.naive.total_s / self.cached.total_s


@dataclass
class KvBenchResult:
    """Everything one kv-bench produced: settings, model facts, raw runs, summary rows."""

    settings: BenchSettings
    parameters: int
    torch_version: str
    runs: list[Run] = field(default_factory=list)

    @property
    def rows(self) -> list[ContextRow]:
        by_key: dict[tuple[str, int], list[Run]] = {}
        for run in self.runs:
            by_key.setdefault((run.path, run.context), []).append(run)
        return [
            ContextRow(c, PathStats.of(by_key[("naive", c)]), PathStats.of(by_key[("cached", c)]))
            for c in dict.fromkeys(self.settings.contexts)
        ]

    def table(self) -> list[dict[str, float | int]]:
        """One flat record per context (the CSV rows)."""
        return [
            {
                "context": row.context,
                "naive_prefill_s": row.naive.prefill_s,
                "naive_decode_s_per_token": row.naive.decode_s_per_token,
                "naive_total_s": row.naive.total_s,
                "cached_prefill_s": row.cached.prefill_s,
                "cached_decode_s_per_token": row.cached.decode_s_per_token,
                "cached_total_s": row.cached.total_s,
                "decode_speedup": row.decode_speedup,
                "total_speedup": row.total_speedup,
            }
            for row in self.rows
        ]

    def to_dict(self) -> dict[str, object]:
        return {
            "settings": asdict(self.settings),
            "parameters": self.parameters,
            "torch_version": self.torch_version,
            "total_speedup_bound": self.settings.new_tokens,
            "rows": self.table(),
            "runs": [asdict(r) for r in self.runs],
        }


def time_generation(
    model: LanguageModel, prompt: list[int], new_tokens: int, use_cache: bool, cache: KVCache | None
) -> list[int]:
    """Arrival offsets (ns) of each generated token, greedy, EOS ignored."""
    start = time.perf_counter_ns()
    stamps = [
        time.perf_counter_ns()
        for _ in iter_generate(model, prompt, new_tokens, use_cache=use_cache, cache=cache)
    ]
    return [t - start for t in stamps]


def run_kv_bench(
    settings: BenchSettings, on_step: Callable[[str], None] | None = None
) -> KvBenchResult:
    """Time both paths at every context; ``on_step`` hears a label after each run.

    Sets torch's intra-op threads to ``settings.threads`` for the duration. The
    naive and cached runs alternate within each repeat so a drift in machine load hits
    both paths alike. The cache is allocated before the clock starts.
    """
    model, prompts = _model_and_prompts(settings)
    for prompt in prompts.values():  # refuse an impossible context before any timing
        check_request(model, prompt, settings.new_tokens)
    notify = on_step or (lambda _label: None)
    result = KvBenchResult(settings, sum(p.numel() for p in model.parameters()),
                           torch.__version__)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        if settings.warmup:
            first = prompts[settings.contexts[0]]
            for use_cache in (False, True):
                time_generation(model, first, settings.new_tokens, use_cache, None)
                notify("warm-up")
        for context, prompt in prompts.items():
            cache = new_cache(model, context + settings.new_tokens - 1)
            for repeat in range(settings.repeats):
                for path in PATHS:
                    use_cache = path == "cached"
                    stamps = time_generation(
                        model, prompt, settings.new_tokens, use_cache, cache if use_cache else None
                    )
                    result.runs.append(Run(path, context, repeat, stamps))
                    notify(f"{path} @ {context}")
    finally:
        torch.set_num_threads(previous_threads)
    return result


def _model_and_prompts(settings: BenchSettings) -> tuple[LanguageModel, dict[int, list[int]]]:
    """The toy preset with random prompts, or the real model with prompts of real text
    (the first tokens of the workload's padding)."""
    if settings.model is not None:
        from kvlab.engine.models import load_model
        from kvlab.servers.fetch import model_file
        from kvlab.studies.prove import gemma_prompt

        loaded = load_model(model_file(settings.model), name=settings.model)
        return loaded.model, {c: gemma_prompt(loaded.tokenizer, c) for c in settings.contexts}
    toy = build_model(get_preset(settings.preset), seed=settings.seed)
    gen = torch.Generator().manual_seed(settings.seed)
    return toy, {
        c: torch.randint(0, toy.config.vocab_size, (c,), generator=gen).tolist()
        for c in settings.contexts
    }
