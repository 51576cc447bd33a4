"""The engine's Gemma 3 against Transformers' Gemma 3 loaded from the same GGUF."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.engine.gemma import Gemma3
from kvlab.engine.gguf_tokenizer import GGUFTokenizer
from kvlab.studies.reference import (
    compare_logits,
    load_transformers_gemma,
    reference_prompts,
    transformers_forced_logits,
)
from tests.rounding import assert_close_up_to_rounding, hold_to_bound


@pytest.mark.slow
def test_logits_equal_transformers_within_tolerance(
    gemma_gguf: Path, gemma_model: Gemma3, gemma_tokenizer: GGUFTokenizer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    reference = load_transformers_gemma(gemma_gguf)
    prompts = {name: gemma_tokenizer.encode(text) for name, text in reference_prompts().items()}
    assert len(prompts) >= 5 and len(prompts["long"]) > gemma_model.config.window
    results = compare_logits(gemma_model, reference, prompts)
    for r in results:  # ok is max_abs_diff <= tolerance, the rounding bound
        hold_to_bound(r.max_abs_diff, r.tolerance, f"prompt {r.name!r}", label=r.name)
        assert r.ok
    assert all(r.argmax_agreement == 1.0 for r in results)
    # Teacher forcing reads the same logits: step i sees the prompt and forced[:i].
    from kvlab.studies.agreement import teacher_forced_logits

    ids, forced = prompts["plain"], [506, 5279, 529]
    theirs = transformers_forced_logits(reference, ids, forced)  # (3, V)
    assert_close_up_to_rounding(teacher_forced_logits(gemma_model, ids, forced), theirs,
                                gemma_model.config, len(ids) + len(forced))
