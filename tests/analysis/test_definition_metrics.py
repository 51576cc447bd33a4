"""A comparison's times under one tool's definitions."""

from __future__ import annotations

import pytest

from kvlab.analysis.definition_metrics import compared_under
from kvlab.analysis.definitions import SETS
from kvlab.errors import ConfigError
from kvlab.peers import read_peer_file
from tests.peers.files import aiperf_lines, vllm_result, write


def test_each_set_compares_the_times_it_defines(tmp_path) -> None:
    assert [m.name for m in compared_under("aiperf")] == ["ttft_ms", "itl_ms", "e2e_ms"]
    assert [m.name for m in compared_under("vllm")] == ["ttft_ms", "itl_ms", "tpot_ms",
                                                        "e2e_ms"]
    assert all(m.compared and "vllm:" in m.definition for m in compared_under("vllm"))
    rows = read_peer_file(write(tmp_path / "vllm.json", vllm_result()))
    itl = next(m for m in compared_under("vllm") if m.name == "itl_ms")
    gaps = [v for v, _ in SETS["vllm"].samples["itl_ms"](rows[0])]
    assert itl.of(rows[0]) == pytest.approx(sum(gaps) / len(gaps))  # its pooled gaps' mean
    e2e = next(m for m in compared_under("aiperf") if m.name == "e2e_ms")
    row = next(r for r in read_peer_file(write(tmp_path / "a.jsonl", aiperf_lines()))
               if not r.warmup)
    assert e2e.of(row) == pytest.approx(100.0 + 10.0 * 63)  # to the last content


def test_an_unknown_set_is_one_line() -> None:
    with pytest.raises(ConfigError, match="unknown definition set 'genai'"):
        compared_under("genai")
