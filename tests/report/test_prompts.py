"""The report's Prompts section: sizing method and server-counted prompt tokens."""

from __future__ import annotations

from kvlab.report.prompts import prompt_rule, prompt_token_spread, prompts_markdown
from kvlab.rundir import ApiKind, Outcome, Record, RunState


def _record(capacity: int, tokens: int | None, warmup: bool = False,
            outcome: Outcome = Outcome.OK) -> Record:
    return Record(run_id="r", mode="m", capacity=capacity, query_id="q", warmup=warmup,
                  api=ApiKind.OPENAI_CHAT, path="/v1/chat/completions", stream=True,
                  prompt_sha256="x", requested_tokens=4, t_sent=0, t_end=1,
                  prompt_tokens=tokens, outcome=outcome)


def test_spread_counts_measured_ok_rows_only() -> None:
    records = [_record(256, 120), _record(256, 126), _record(256, 900, warmup=True),
               _record(256, 5, outcome=Outcome.HTTP_ERROR), _record(512, None),
               _record(512, 250)]
    assert prompt_token_spread(records) == {256: (120, 123.0, 126, 2), 512: (250, 250.0, 250, 1)}


def test_section_names_the_method_and_the_spread() -> None:
    manifest = {"prompt_sizing": {
        "256": {"method": "usage-calibration", "source": "http://h/v1/chat/completions",
                "sha256": None, "probes": 31},
        "512": {"method": "tokenizer-file", "source": "/m/tokenizer.json",
                "sha256": "ab" * 32, "probes": 0}}}
    state = RunState.model_validate(manifest)
    text = prompts_markdown(state, [_record(256, 120), _record(256, 126)], 0.5)
    assert "| 256 | 128 | calibration on the server's usage.prompt_tokens" in text
    assert "31 probe requests" in text and "120 / 123.0 / 126 | 2 |" in text
    assert "| 512 | 256 | the tokenizer file /m/tokenizer.json" in text
    assert "no record states them" in text


def test_rule_says_what_the_code_targets() -> None:
    assert "f·C − max(query tokens) − 2" in prompt_rule(0.5)
    assert prompts_markdown(RunState(), [], 0.5) == ""
