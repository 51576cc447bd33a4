"""The proof before the speed: cached generation equals full recomputation.

For each configuration, on the same weights and prompt: the naive path (recompute the
whole sequence every step), the cached path (one prefill, then one token at a time)
and a chunked-prefill cached path (the prompt in several cached passes, which uses the
offset mask) must choose the same tokens, their logits must agree within a float32
tolerance, and every layer's cache must end at prompt + new - 1 tokens (the last
chosen token is never fed back).

The same proof runs on the real Gemma 3 270M (:func:`prove_gemma`), on a real prompt
longer than its 512-token window: its sliding layers keep only a ring of 512 cells, and
the chunked prefill crosses the window, so the ring wraps inside a prefill.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from kvlab.engine.config import get_preset
from kvlab.engine.generate import generate
from kvlab.engine.lm import LanguageModel
from kvlab.engine.masks import causal_mask
from kvlab.engine.model import build_model
from kvlab.engine.rounding import rounding_bound
from kvlab.errors import ConfigError

MASK_NEW, MASK_PAST = 2, 4  # the notebook's exercise: 2 new tokens after a cache of 4


@dataclass
class ConfigProof:
    """The outcome of the proof on one model configuration."""

    preset: str
    attention: str  # MHA, GQA or MQA
    n_heads: int
    n_kv_heads: int
    parameters: int
    parameters_at_512: int  # same shape with the notebook's 512-row position table
    prompt_tokens: int
    new_tokens: int
    seed: int
    sequences_equal: bool  # naive == cached == chunked-prefill cached
    max_abs_logit_delta: float  # naive vs cached, over every step and vocab entry
    max_abs_logit_delta_chunked: float  # naive vs chunked-prefill cached
    prefill_chunk: int  # tokens per pass in the chunked prefill
    cache_lengths: list[int]  # per layer, after the cached generation
    expected_cache_length: int  # prompt + new - 1
    cache_bytes: int  # K+V bytes allocated for exactly that length
    tolerance: float  # max |delta| rounding explains (kvlab.engine.rounding)
    cache_cells: list[int] = field(default_factory=list)  # per layer: cells allocated
    window: int | None = None  # sliding window of the sliding layers; None: none slide

    @property
    def logits_close(self) -> bool:
        return max(self.max_abs_logit_delta, self.max_abs_logit_delta_chunked) < self.tolerance

    @property
    def cache_length_ok(self) -> bool:
        return all(n == self.expected_cache_length for n in self.cache_lengths)

    @property
    def sliding_layers(self) -> int:
        """Layers whose cache is a ring of ``window`` cells (fewer than the tokens)."""
        return sum(c < self.expected_cache_length for c in self.cache_cells)

    @property
    def ok(self) -> bool:
        return self.sequences_equal and self.logits_close and self.cache_length_ok


@dataclass
class ProofReport:
    """Every configuration's proof plus the offset-mask example."""

    mask: list[list[bool]]  # MASK_NEW x (MASK_PAST + MASK_NEW)
    proofs: list[ConfigProof] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.proofs)

    def to_dict(self) -> dict[str, object]:
        """Plain data for JSON, with each check's verdict spelled out."""
        return {
            "ok": self.ok,
            "mask": {"new": MASK_NEW, "past": MASK_PAST, "rows": self.mask},
            "proofs": [
                asdict(p) | {"logits_close": p.logits_close,
                             "cache_length_ok": p.cache_length_ok,
                             "sliding_layers": p.sliding_layers, "ok": p.ok}
                for p in self.proofs
            ],
        }


def mask_reading(mask: list[list[bool]], past: int) -> str:
    """One line saying which keys each new query sees."""
    parts = []
    for i, row in enumerate(mask):
        seen = [j for j, visible in enumerate(row) if visible]
        parts.append(f"query at position {past + i} sees keys {seen[0]}..{seen[-1]}")
    return "; ".join(parts) + " (a new token never sees a later one)"


def prove_model(
    label: str, model: LanguageModel, prompt: list[int], new_tokens: int, seed: int, *,
    parameters: int, parameters_at_512: int,
) -> ConfigProof:
    """Naive, cached and chunked-prefill cached generation of one model on ``prompt``.

    The logits must agree within the rounding bound of :mod:`kvlab.engine.rounding`:
    the three paths sum the same float32 terms in other orders (masked, causal and
    one-row attention kernels), which no CPU rounds alike.
    """
    config = model.config
    chunk = max(1, -(-len(prompt) // 3))  # three passes (fewer for tiny prompts)
    naive = generate(model, prompt, new_tokens, use_cache=False, seed=seed, keep_logits=True)
    cached = generate(model, prompt, new_tokens, seed=seed, keep_logits=True)
    chunked = generate(
        model, prompt, new_tokens, seed=seed, keep_logits=True, prefill_chunk=chunk
    )
    assert naive.logits is not None and cached.logits is not None
    assert chunked.logits is not None and cached.cache is not None
    windows = [w for w in config.layer_windows if w is not None]
    return ConfigProof(
        preset=label,
        attention=config.attention_kind,
        n_heads=config.n_heads,
        n_kv_heads=config.n_kv_heads,
        parameters=parameters,
        parameters_at_512=parameters_at_512,
        prompt_tokens=len(prompt),
        new_tokens=new_tokens,
        seed=seed,
        sequences_equal=naive.tokens == cached.tokens == chunked.tokens,
        max_abs_logit_delta=float((naive.logits - cached.logits).abs().max()),
        max_abs_logit_delta_chunked=float((naive.logits - chunked.logits).abs().max()),
        prefill_chunk=chunk,
        cache_lengths=cached.cache.layer_lengths(),
        expected_cache_length=len(prompt) + new_tokens - 1,
        cache_bytes=cached.cache.nbytes,
        tolerance=rounding_bound(naive.logits, config, len(prompt) + new_tokens),
        cache_cells=list(cached.cache.cells),
        window=windows[0] if windows else None,
    )


def prove_config(preset: str, prompt_tokens: int, new_tokens: int, seed: int) -> ConfigProof:
    """Prove one toy preset on a random prompt, with weights drawn from ``seed``."""
    config = get_preset(preset)
    model = build_model(config, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, config.vocab_size, (prompt_tokens,), generator=gen).tolist()
    parameters = model.num_parameters()
    return prove_model(
        preset, model, prompt, new_tokens, seed, parameters=parameters,
        parameters_at_512=parameters - (config.max_len - 512) * config.d_model,
    )


def gemma_prompt(tokenizer: Any, prompt_tokens: int) -> list[int]:
    """The first ``prompt_tokens`` tokens (BOS first) of the workload's padding text."""
    from kvlab.bench.plan.workload import padding_text

    ids: list[int] = tokenizer.encode(padding_text())
    if prompt_tokens > len(ids):
        raise ConfigError(f"prompt_tokens must be at most {len(ids)}, got {prompt_tokens}")
    return ids[:prompt_tokens]


def prove_gemma(
    name: str = "gemma-3-270m", prompt_tokens: int = 600, new_tokens: int = 8,
    seed: int = 42, threads: int | None = 2, loaded: Any = None,
) -> ProofReport:
    """The proof on a real Gemma 3 (float32), over a prompt of real text.

    ``prompt_tokens`` should exceed the window (512) so the sliding layers' rings wrap.
    ``loaded``: an already loaded :class:`kvlab.engine.models.LoadedModel` (else loaded
    here, about 20 s).
    """
    from kvlab.engine.models import load_model
    from kvlab.servers.fetch import model_file

    _check_counts(threads, prompt_tokens, new_tokens)
    loaded = loaded or load_model(model_file(name), name=name)
    prompt = gemma_prompt(loaded.tokenizer, prompt_tokens)
    report = ProofReport(mask=causal_mask(MASK_NEW, MASK_PAST).tolist())
    with _threads(threads):
        parameters = loaded.model.num_parameters()
        report.proofs.append(prove_model(
            name, loaded.model, prompt, new_tokens, seed, parameters=parameters,
            parameters_at_512=parameters,
        ))
    return report


@contextmanager
def _threads(threads: int | None) -> Iterator[None]:
    """torch intra-op threads set to ``threads`` inside (None: left alone)."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def run_proof(
    preset: str = "toy",
    prompt_tokens: int = 48,
    new_tokens: int = 20,
    seed: int = 42,
    also: tuple[str, ...] = ("toy-gqa", "toy-mqa"),
    threads: int | None = 1,
) -> ProofReport:
    """Prove ``preset`` and then each of ``also`` (skipping repeats).

    ``threads``: torch intra-op threads while proving (restored after); None leaves
    torch's setting alone. One thread by default: the proof is about equality, and
    several threads on a busy machine can make these tiny passes many times slower.
    """
    _check_counts(threads, prompt_tokens, new_tokens)
    names = [preset, *(p for p in also if p != preset)]
    for name in names:
        get_preset(name)  # unknown names fail before any work
    mask = causal_mask(MASK_NEW, MASK_PAST).tolist()
    report = ProofReport(mask=mask)
    with _threads(threads):
        for name in names:
            report.proofs.append(prove_config(name, prompt_tokens, new_tokens, seed))
    return report


def _check_counts(threads: int | None, prompt_tokens: int, new_tokens: int) -> None:
    """Refuse a non-positive thread, prompt or generation count (ConfigError, one line)."""
    if threads is not None and threads <= 0:
        raise ConfigError(f"threads must be positive, got {threads}")
    if prompt_tokens <= 0 or new_tokens <= 0:
        raise ConfigError(
            f"prompt and new token counts must be positive, got prompt={prompt_tokens}, "
            f"new={new_tokens}"
        )
