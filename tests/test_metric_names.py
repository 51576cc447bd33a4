"""What a server's /metrics names mean: each kind's names survive the manifest, a table
that is not one is refused with the field that is wrong, and readings are recognised
by their prompt counter."""

from __future__ import annotations

import pytest

from kvlab.metric_names import EMBEDDED, KNOWN, LLAMACPP, VLLM, MetricNames, recognised


@pytest.mark.parametrize("names", KNOWN, ids=lambda m: m.server)
def test_each_kinds_names_read_back_as_written(names: MetricNames) -> None:
    assert MetricNames.from_dict(names.to_dict()) == names


@pytest.mark.parametrize(("table", "where"), [
    ({"server": "x"}, "prefix"),
    ({"server": "x", "prefix": "x:", "names": 3}, "names"),
    ({"server": "x", "prefix": "x:", "prompt_counts": "some"}, "prompt_counts"),
    ({"server": "x", "prefix": "x:", "kv_waiting": ["only a name"]}, "kv_waiting"),
])
def test_a_table_that_is_not_one_is_refused_naming_the_field(table: dict[str, object],
                                                           where: str) -> None:
    with pytest.raises(ValueError, match=f"not a server's metric names \\({where}"):
        MetricNames.from_dict(table)


def test_readings_are_recognised_by_their_prompt_counter() -> None:
    assert recognised({'vllm:prompt_tokens_total{model_name="m"}': 3.0}) == VLLM
    assert recognised({"llamacpp:prompt_tokens_total": 1.0}) == LLAMACPP
    assert recognised({"kvlab:prompt_tokens_total": 1.0}) == EMBEDDED
    assert recognised({"other:prompt_tokens_total": 1.0}) is None
    assert LLAMACPP.full("preemptions") is None
    assert VLLM.full("preemptions") == "vllm:num_preemptions_total"
