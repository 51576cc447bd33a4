"""One vocabulary: the table, the objectives' spellings and --goodput."""

from __future__ import annotations

import pytest

from kvlab.analysis.definitions import SETS
from kvlab.analysis.vocabulary import (
    SLO_SPELLINGS,
    TOOLS,
    VOCABULARY,
    markdown_table,
    parse_goodput,
    slo_field,
)
from kvlab.bench.plan.load_settings import SearchSettings, SloSettings
from kvlab.errors import ConfigError


def test_every_row_names_each_tool_and_latencies_come_from_the_definition_sets() -> None:
    assert len(TOOLS) == 5 and all(len(c.terms) == len(TOOLS) for c in VOCABULARY)
    concepts = [c.concept for c in VOCABULARY]
    for needed in ("TTFT, first token", "TTFT, first answer", "ITL", "TPOT", "e2e",
                   "goodput", "SLO on TTFT", "SLO per output token", "SLO on e2e"):
        assert any(c.startswith(needed) for c in concepts), needed
    itl = next(c for c in VOCABULARY if c.concept.startswith("ITL"))
    assert itl.terms[3].definition == SETS["vllm"].definitions["itl_ms"]
    table = markdown_table()
    assert table.count("\n") == len(VOCABULARY) + 2
    assert all(tool in table.splitlines()[0] for tool in TOOLS)


@pytest.mark.parametrize(("spelling", "field"), [
    ("ttft", "ttft_ms"), ("tpot", "itl_ms"), ("e2el", "e2e_ms"),  # vLLM
    ("time_to_first_token", "ttft_ms"), ("inter_token_latency", "itl_ms"),  # AIPerf
    ("request_latency", "e2e_ms"), ("tpot_ms", "itl_ms"), ("e2el_ms", "e2e_ms"),  # GuideLLM
    ("itl_ms", "itl_ms"), ("TTFT", "ttft_ms")])
def test_each_tools_spelling_is_kvlabs_field(spelling: str, field: str) -> None:
    assert slo_field(spelling) == field


def test_an_unknown_objective_lists_the_spellings() -> None:
    with pytest.raises(ConfigError, match=r"unknown objective 'ttfb'.*time_to_first_token"):
        slo_field("ttfb")
    assert "ttft" in SLO_SPELLINGS and "normalized_time_per_output_token" not in SLO_SPELLINGS


def test_goodput_reads_vllm_and_aiperf_text() -> None:
    assert parse_goodput("ttft:200 tpot:50 e2el:1000") == {
        "ttft_ms": 200.0, "itl_ms": 50.0, "e2e_ms": 1000.0}
    assert parse_goodput("time_to_first_token:150,inter_token_latency:3.4") == {
        "ttft_ms": 150.0, "itl_ms": 3.4}
    for bad, why in (("ttft", "NAME:MS"), ("ttft:-1", "positive"), ("", "empty"),
                     ("ttft:1 time_to_first_token:2", "twice"), ("x:1", "unknown")):
        with pytest.raises(ConfigError, match=why):
            parse_goodput(bad)


def test_slo_and_search_tables_take_the_peers_names() -> None:
    assert SloSettings.model_validate({"ttft": 200, "tpot": 50}) == SloSettings(
        ttft_ms=200, itl_ms=50)
    assert SloSettings.model_validate({"request_latency": 900}).e2e_ms == 900
    search = SearchSettings.model_validate({"low": 1, "high": 4, "time_to_first_token": 300})
    assert search.ttft_ms == 300
    with pytest.raises(ValueError, match="name the same objective"):
        SloSettings.model_validate({"ttft": 200, "ttft_ms": 100})
    with pytest.raises(ValueError, match="extra"):
        SloSettings.model_validate({"ttfb": 1})
