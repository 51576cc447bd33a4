"""A trace row's server blocks named from its hash ids, and prepared.json's blocks read."""

from __future__ import annotations

from kvlab.bench.analysis.trace_hits import TraceBlocks, server_block_names, trace_blocks
from tests.bench.rows import row


def test_server_blocks_are_named_by_the_trace_blocks_they_end_in() -> None:
    a = TraceBlocks(("1", "2", "0~2"), 32, 80)
    b = TraceBlocks(("1", "3", "1~2"), 32, 80)
    # the server counts one token more (BOS): block k ends at text token 16(k+1) - 2
    names_a = server_block_names(row(prompt_tokens=81, output_tokens=30, position=0), a, 16)
    names_b = server_block_names(row(prompt_tokens=81, output_tokens=30, position=1), b, 16)
    assert len(names_a) == (81 + 30 - 1) // 16 == 6
    assert names_a[0] == (("1",), 14) and names_a[2] == (("1", "2"), 14)
    assert names_a[:2] == names_b[:2] and names_a[2] != names_b[2]
    assert names_a[4] == (("1", "2", "0~2"), 14)  # the last block of the prompt
    assert names_a[5] == (("a", 0), 5)  # reaches into the output: the row's own
    assert server_block_names(row(prompt_tokens=40, position=7), None, 16)[0] == (("a", 7), 0)


def test_prepared_json_gives_each_trace_rows_blocks() -> None:
    prepared = {"prompts": {"512": [
        {"query_id": "line1", "tokens": 130, "blocks": ["1", "2"], "block_tokens": 32},
        {"query_id": "q", "tokens": 10}]}}
    assert trace_blocks(prepared) == {(512, "line1"): TraceBlocks(("1", "2"), 32, 130)}
    assert trace_blocks(None) == {}
