"""Peer result files read into kvlab Records: shapes, clocks, refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvlab.analysis import definitions as d
from kvlab.analysis import metrics
from kvlab.analysis.validate import check_row
from kvlab.errors import ConfigError, ValidationFailure
from kvlab.peers import read_peer_file
from tests.peers.files import aiperf_lines, guidellm_report, vllm_result, write


def test_vllm_result_becomes_imported_records(tmp_path) -> None:
    path = write(tmp_path / "vllm.json", vllm_result())
    rows = read_peer_file(path)
    assert len(rows) == 6 and {r.mode for r in rows} == {"vllm"}
    r = rows[1]
    assert r.imported_from == str(path) and r.timings is None and r.cached_tokens is None
    assert r.t_sent == 1_000_000_000 and r.query_id == "r00001" and r.requested_tokens == 64
    assert metrics.ttft_ms(r) == pytest.approx(100.0)
    assert metrics.e2e_ms(r) == pytest.approx(730.0)
    assert len(r.chunk_ns) == 64 and check_row(r) == []
    # vLLM's own TPOT from the imported clock: (latency − TTFT) / (out − 1).
    assert d.vllm_tpot_ms(r) == pytest.approx(10.0)


def test_guidellm_report_becomes_imported_records(tmp_path) -> None:
    rows = read_peer_file(write(tmp_path / "benchmarks.json", guidellm_report()))
    r = rows[0]
    assert r.mode == "guidellm" and r.load is None and r.prompt == "query 0"
    assert r.query_id.startswith("p") and len(r.prompt_sha256) == 64
    assert metrics.ttft_ms(r) == pytest.approx(100.0)
    assert metrics.itl_effective_ms(r) == pytest.approx(10.0)
    assert metrics.e2e_ms(r) == pytest.approx(780.0)
    assert r.chunk_ns == [] and check_row(r) == []
    assert metrics.answer_ttft_ms(r) is None  # a file from before GuideLLM 0.7


def test_guidellm_first_output_token_is_the_first_answer_token(tmp_path) -> None:
    """GuideLLM 0.7 times its first token of any kind (reasoning included) and the first
    answer token (``first_output_token_iteration``, its TTFOT) apart, as kvlab does."""
    report = guidellm_report(answer_after=0.25)
    r = read_peer_file(write(tmp_path / "benchmarks.json", report))[0]
    assert metrics.ttft_ms(r) == pytest.approx(100.0)
    assert metrics.answer_ttft_ms(r) == pytest.approx(350.0)


def test_aiperf_first_output_token_is_the_first_answer_token(tmp_path) -> None:
    lines = aiperf_lines()
    for line in lines:
        line["metrics"]["time_to_first_output_token"] = {"value": 180.0, "unit": "ms"}
    r = read_peer_file(write(tmp_path / "profile_export.jsonl", lines))[1]
    assert metrics.ttft_ms(r) == pytest.approx(100.0)
    assert metrics.answer_ttft_ms(r) == pytest.approx(180.0)


def test_aiperf_export_becomes_imported_records(tmp_path) -> None:
    rows = read_peer_file(write(tmp_path / "profile_export.jsonl", aiperf_lines()))
    assert [r.warmup for r in rows] == [True] + [False] * 6
    r = rows[1]
    assert metrics.ttft_ms(r) == pytest.approx(100.0)
    assert d.aiperf_e2e_ms(r) == pytest.approx(730.0)
    assert metrics.e2e_ms(r) == pytest.approx(735.0)  # request end, after the last content
    assert d.aiperf_itl_ms(r) == pytest.approx(10.0)


def test_wrong_output_token_counts_refuse_the_file(tmp_path) -> None:
    path = write(tmp_path / "short.json", vllm_result(output_lens=[64, 64, 58, 64, 64, 64]))
    with pytest.raises(ValidationFailure) as err:
        read_peer_file(path)
    assert str(path) in str(err.value) and "request 2: 58 output tokens, 64 requested" in \
        str(err.value)
    path = write(tmp_path / "g.json", guidellm_report(output_tokens=[64] * 5 + [12]))
    with pytest.raises(ValidationFailure, match="request 5: 12 output tokens"):
        read_peer_file(path)


def test_a_vllm_count_above_max_tokens_is_named_as_client_retokenization(tmp_path) -> None:
    """15 to 17 counted for 16 forced tokens: vLLM's client re-tokenized the text (the
    stream had no usage chunk it reads), which the refusal says instead of ignore_eos."""
    path = write(tmp_path / "retok.json",
                 vllm_result(out=16, output_lens=[16, 17, 15, 16, 16, 16]))
    with pytest.raises(ValidationFailure) as err:
        read_peer_file(path)
    message = str(err.value)
    assert "request 1 counted 17 tokens for max_tokens 16" in message
    assert "re-tokenizing" in message and "choices: []" in message
    assert "force the length" not in message
    short = write(tmp_path / "short.json", vllm_result(out=16, output_lens=[16, 15] + [16] * 4))
    with pytest.raises(ValidationFailure) as err:  # below max_tokens: either cause
        read_peer_file(short)
    assert "either the server stopped early (force the length: ignore_eos) or" in \
        str(err.value)


def test_requested_length_must_be_known(tmp_path) -> None:
    data = vllm_result()
    del data["output_len"]
    path = write(tmp_path / "v.json", data)
    with pytest.raises(ConfigError, match="give --requested-tokens N"):
        read_peer_file(path)
    assert read_peer_file(path, requested_tokens=64)[0].requested_tokens == 64
    with pytest.raises(ValidationFailure):
        read_peer_file(path, requested_tokens=32)


def test_unknown_shapes_are_one_line(tmp_path) -> None:
    path = write(tmp_path / "other.json", {"results": []})
    with pytest.raises(ConfigError) as err:
        read_peer_file(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    assert "GuideLLM benchmarks.json" in message and "AIPerf profile_export.jsonl" in message
    assert "vLLM bench serve JSON" in message
    summary = write(tmp_path / "summary.json", vllm_result(detailed=False))
    with pytest.raises(ConfigError, match="--save-detailed"):
        read_peer_file(summary)
    (tmp_path / "bad.txt").write_text("not json\n")
    with pytest.raises(ConfigError, match="not a result file kvlab reads"):
        read_peer_file(tmp_path / "bad.txt")


def test_a_broken_file_of_a_known_shape_is_one_line(tmp_path) -> None:
    data = vllm_result()
    data["itls"] = data["itls"][:2]  # fewer per-request lists than requests
    path = write(tmp_path / "broken.json", data)
    with pytest.raises(ConfigError, match="a vllm result kvlab cannot read") as err:
        read_peer_file(path)
    assert "\n" not in str(err.value)


DATA = Path(__file__).parent / "data"


def test_a_recorded_vllm_bench_serve_against_kvlab_serve_is_accepted() -> None:
    """The recorded exchange: ``vllm bench serve`` 0.32 (random 32 in / 16 out,
    --ignore-eos, 8 prompts, 2 at a time) against ``kvlab serve --model gemma-3-270m``
    once its completions stream put usage in a chunk with choices: [] (the command is
    in tests/serve/test_vllm_client.py). vLLM's client read the server's usage: the
    prompt counts are the server's 32 (31 + BOS), and every output count is the 16
    forced tokens; kvlab compare accepts the file."""
    from kvlab.report.compare_runs import compare_runs
    from kvlab.store.runs import load_run_or_import

    path = DATA / "vllm-0.32-vs-kvlab-serve-usage-chunk.json"
    records = read_peer_file(path)
    assert len(records) == 8 and all(r.output_tokens == r.requested_tokens == 16
                                     for r in records)
    assert {r.prompt_tokens for r in records} == {32}
    assert all(check_row(r) == [] for r in records)
    result = compare_runs(load_run_or_import(path), load_run_or_import(path), resamples=200)
    ((mode, comparison),) = result.comparisons
    assert mode == "vllm" and not comparison.refused
    # Before the fix the usage rode on the finish chunk, which vLLM's client reads as a
    # token chunk: it never saw usage, and its prompt counts are its own plan (31).
    before = read_peer_file(DATA / "vllm-0.32-vs-kvlab-serve-before-fix.json")
    assert {r.prompt_tokens for r in before} == {31}


def test_a_missing_field_is_named(tmp_path) -> None:
    """A format change (a field kvlab reads, gone) is one line naming the field."""
    from kvlab.peers import missing_field
    from kvlab.peers.common import first_missing

    report = guidellm_report()
    del report["benchmarks"][0]["requests"]["successful"][2]["info"]["timings"][
        "first_token_iteration"]
    path = write(tmp_path / "benchmarks.json", report)
    field = "benchmarks[].requests.successful[].info.timings.first_token_iteration"
    with pytest.raises(ConfigError, match=re.escape(f"without the field {field}")):
        read_peer_file(path)
    assert missing_field(path) == field
    lines = aiperf_lines()
    del lines[3]["metrics"]["request_latency"]
    with pytest.raises(ConfigError, match=re.escape("[].metrics.request_latency")):
        read_peer_file(write(tmp_path / "profile_export.jsonl", lines))
    assert first_missing({"a": []}, ["a[].b"]) is None  # nothing to lack
    assert first_missing({"a": [{"b": 1}, {}]}, ["a[].b"]) == "a[].b"
    assert first_missing({"a": 1}, ["a[].b"]) == "a[].b"


def test_aiperf_013_says_the_requested_length_through_its_mismatch(tmp_path) -> None:
    """AIPerf 0.13 exports osl_mismatch_diff_pct, not requested_osl, when --osl asked."""
    lines = aiperf_lines(out=16)
    for line in lines:
        del line["metrics"]["requested_osl"]
        line["metrics"]["osl_mismatch_diff_pct"] = {"value": 0.0, "unit": "%"}
    lines[2]["metrics"]["output_sequence_length"]["value"] = 12
    lines[2]["metrics"]["osl_mismatch_diff_pct"]["value"] = -25.0
    with pytest.raises(ValidationFailure, match="12 output tokens, 16 requested"):
        read_peer_file(write(tmp_path / "profile_export.jsonl", lines))
    del lines[2]
    rows = read_peer_file(write(tmp_path / "profile_export.jsonl", lines))
    assert {r.requested_tokens for r in rows} == {16}
