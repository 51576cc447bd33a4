"""The engine against the real llama-server on the bundled Gemma 3 270M (a subset of
the protocol's queries; ``kvlab engine-check`` runs all 30)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kvlab.bench.plan.workload import builtin_queries
from kvlab.engine.gemma import Gemma3
from kvlab.engine.gguf_tokenizer import GGUFTokenizer
from kvlab.engine.models import LoadedModel
from kvlab.studies.agreement import (
    AgreementReport,
    DecodeCheck,
    ForcedCheck,
    TokenizerCheck,
    run_agreement,
    score_forced,
)


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
    assert summary["teacher_forced"]["engine"]["top1"] == pytest.approx(189 / 192)


def test_other_predictors_are_scored_beside_the_engine() -> None:
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 2.9], [0.0, 1.0, 0.5]])  # (3, V)
    check = score_forced(logits, [1, 2, 0])  # top-1 is 1, 0, 1
    assert check.agree == 1
    assert check.ranks == [2, 3]
    assert check.margins == pytest.approx([3.0 - 2.9, 1.0])
    report = AgreementReport(decode=[
        DecodeCheck("q01", 250, 3, 3, 3, others={"x": check}),
        DecodeCheck("q02", 250, 1, 2, 3, [0.2], [2], others={"x": ForcedCheck(3)})])
    forced = report.summary()["teacher_forced"]
    assert list(forced) == ["engine", "x"]
    assert forced["engine"]["top1"] == pytest.approx(5 / 6)
    assert forced["x"]["top1"] == pytest.approx(4 / 6)
    assert forced["x"]["miss_ranks"] == {2: 1, 3: 1}
    assert forced["x"]["max_margin"] == pytest.approx(1.0)


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
