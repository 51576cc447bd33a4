from __future__ import annotations

import dataclasses

import pytest

from kvlab.errors import ConfigError
from kvlab.studies.prove import mask_reading, run_proof
from tests.rounding import hold_to_bound


def test_proof_passes_for_mha_gqa_mqa() -> None:
    report = run_proof("toy", prompt_tokens=10, new_tokens=5, seed=1)
    assert [p.preset for p in report.proofs] == ["toy", "toy-gqa", "toy-mqa"]
    assert [p.attention for p in report.proofs] == ["MHA", "GQA", "MQA"]
    for proof in report.proofs:
        assert proof.sequences_equal and proof.ok
        hold_to_bound(max(proof.max_abs_logit_delta, proof.max_abs_logit_delta_chunked),
                      proof.tolerance, label=proof.preset)
        assert proof.logits_close
        assert proof.cache_lengths == [14, 14, 14] == [proof.expected_cache_length] * 3
    assert report.proofs[0].parameters_at_512 == 1_090_080
    assert report.ok and report.to_dict()["ok"] is True
    assert report.mask == [[True] * 5 + [False], [True] * 6]


def test_a_failed_check_fails_the_report() -> None:
    report = run_proof("toy-mqa", prompt_tokens=4, new_tokens=2, also=())
    proof = report.proofs[0]
    report.proofs[0] = dataclasses.replace(proof, max_abs_logit_delta=2 * proof.tolerance)
    assert not report.proofs[0].logits_close and not report.ok
    report.proofs[0] = dataclasses.replace(proof, cache_lengths=[5, 5, 4])
    assert not report.proofs[0].cache_length_ok and not report.ok


def test_mask_reading() -> None:
    line = mask_reading([[True] * 5 + [False], [True] * 6], past=4)
    assert "position 4 sees keys 0..4" in line and "position 5 sees keys 0..5" in line


@pytest.mark.parametrize(("kwargs"), [{"prompt_tokens": 0}, {"new_tokens": -1},
                                      {"preset": "big"}, {"threads": 0}])
def test_bad_input(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        run_proof(**kwargs)  # type: ignore[arg-type]


@pytest.mark.slow
def test_gemma_proof_on_a_prompt_longer_than_its_window(gemma_model, gemma_tokenizer,
                                                        gemma_gguf) -> None:  # type: ignore[no-untyped-def]
    from kvlab.engine.models import LoadedModel
    from kvlab.studies.prove import prove_gemma

    loaded = LoadedModel("gemma-3-270m", gemma_gguf, "", gemma_model, gemma_tokenizer)
    report = prove_gemma(prompt_tokens=530, new_tokens=3, threads=None, loaded=loaded)
    proof = report.proofs[0]
    hold_to_bound(max(proof.max_abs_logit_delta, proof.max_abs_logit_delta_chunked),
                  proof.tolerance)
    assert proof.ok and proof.sequences_equal, report.to_dict()
    assert proof.prompt_tokens == 530 > proof.window == 512
    assert proof.cache_lengths == [532] * 18
    # 15 sliding layers keep a ring of 512 cells; layers 5, 11, 17 keep all 532.
    assert proof.sliding_layers == 15 and proof.cache_cells[:6] == [512] * 5 + [532]


def test_gemma_proof_bad_input() -> None:
    from kvlab.studies.prove import prove_gemma

    with pytest.raises(ConfigError, match="unknown model 'nope'"):
        prove_gemma("nope")
    with pytest.raises(ConfigError, match="must be positive"):
        prove_gemma(prompt_tokens=0)
