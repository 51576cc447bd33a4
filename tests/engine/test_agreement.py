"""The engine against the real llama-server on the bundled Gemma 3 270M (a subset of
the protocol's queries; ``kvlab engine-check`` runs all 30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.bench.workload import builtin_queries
from kvlab.engine.agreement import AgreementReport, DecodeCheck, TokenizerCheck, run_agreement
from kvlab.engine.gemma import Gemma3
from kvlab.engine.gguf_tokenizer import GGUFTokenizer
from kvlab.engine.models import LoadedModel


def test_summary_figures() -> None:
    report = AgreementReport(
        tokenizer=[TokenizerCheck(512, "q01", 250, True, None),
                   TokenizerCheck(512, "q02", 251, False, 17)],
        decode=[DecodeCheck("q01", 250, 64, 64, 64), DecodeCheck("q02", 251, 7, 63, 64, [0.1]),
                DecodeCheck("q03", 252, 20, 62, 64, [0.02, 0.3])],
    )
    summary = report.summary()
    assert (summary["tokenizer_equal"], summary["tokenizer_total"]) == (1, 2)
    assert (summary["agreed_median"], summary["agreed_min"]) == (20, 7)
    assert summary["teacher_forced_top1"] == pytest.approx(189 / 192)
    assert summary["max_mismatch_margin"] == 0.3
    assert AgreementReport().summary()["agreed_median"] is None


@pytest.mark.llamacpp
@pytest.mark.slow
def test_tokens_and_greedy_decoding_agree_with_llama_server(
    gemma_gguf: Path, gemma_model: Gemma3, gemma_tokenizer: GGUFTokenizer, tmp_path: Path,
) -> None:
    from kvlab.errors import KvlabError
    from kvlab.servers.binary import find_llama_server

    try:
        find_llama_server()
    except KvlabError as exc:
        pytest.skip(f"llama-server is missing: {exc}")
    loaded = LoadedModel("gemma-3-270m", gemma_gguf, "", gemma_model, gemma_tokenizer)
    report = run_agreement(loaded, queries=builtin_queries(3), capacities=[512, 2048],
                           decode_capacity=512, n_predict=16, server_threads=2,
                           log_dir=tmp_path)
    summary = report.summary()
    assert summary["tokenizer_total"] == 6
    assert summary["tokenizer_equal"] == 6, report.to_dict()["tokenizer"]
    assert max(t.server_tokens for t in report.tokenizer) > 512  # prompts beyond the window
    # Quantized activations in llama.cpp allow rare near-tie flips, never a different model.
    assert summary["agreed_min"] >= 1
    assert summary["teacher_forced_top1"] >= 0.9, report.to_dict()["decode"]
    assert all(0 < m < 1.0 for d in report.decode for m in d.mismatch_margins)  # near ties
