"""A trace row's server blocks named from its hash ids, and
the hits a trace predicts set against those the server counted: drift flagged."""

from __future__ import annotations

from kvlab.analysis.server_counters import Check, PointCounters
from kvlab.analysis.trace_hits import (
    PointHits,
    TraceBlocks,
    server_block_names,
    trace_hits,
)
from kvlab.memory.presets import shape_from_preset
from kvlab.memory.served import ServedKv
from kvlab.report.trace_hits import section_body
from tests.rows import MS, row


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


def _replay(cached_b: int, counted: float) -> PointHits:
    """Two trace rows sharing their first block of 32 tokens (65 prompt tokens as the
    server counts them, BOS included), the second sent once the first ended, on a kvlab
    serve of 16-token blocks with its prefix cache; the server counted ``counted`` hits
    and the second row reported ``cached_b`` cached tokens."""
    served = ServedKv("paged-blocks", shape_from_preset("toy"), "f32", max_seqs=4, block_size=16,
                      kv_blocks=400, prefix_caching=True)
    blocks = {(512, "a"): TraceBlocks(("1", "2"), 32, 64),
              (512, "b"): TraceBlocks(("1", "3"), 32, 64)}
    common = {"prompt_tokens": 65, "output_tokens": 16, "load": "trace=1.0",
              "body": {"cache_prompt": True}, "chunk_ns": []}
    rows = [row(query_id="a", position=0, cached_tokens=0, t_sent=0,
                t_first_content=100 * MS, t_end=1000 * MS, **common),
            row(query_id="b", position=1, cached_tokens=cached_b, t_sent=2000 * MS,
                t_first_content=2100 * MS, t_end=3000 * MS, **common)]
    not_read = Check(None, None, "not checkable")
    counters = [PointCounters("a", 512, "trace=1.0", "kvlab", 2,
                              {"prefix_cache_hits": counted}, not_read, not_read, True,
                              3.0, (0, 2))]
    (point,) = trace_hits({("a", 512): served}, rows, blocks, counters, [])
    return point


def test_hits_the_trace_predicts_and_the_server_counts_agree() -> None:
    point = _replay(cached_b=32, counted=32.0)
    # b finds a's first two server blocks: tokens 0..31 end inside trace block "1"
    assert (point.predicted, point.counted, point.cached) == (32, 32.0, 32)
    assert not point.drift and point.differing == ()


def test_a_workload_other_than_the_trace_is_flagged_as_drift() -> None:
    # the prompts sent did not share the text their hash_ids say: nothing was found
    point = _replay(cached_b=0, counted=0.0)
    assert point.predicted == 32 and point.drift
    assert point.differing == (("b", 32, 0),)
    assert point.to_dict()["drift"] is True
    report = section_body([point])  # the report's "Trace prefix-cache hits" says so
    assert "| 32 | 0 | 0 | **drift** |" in report and "b: 32, 0" in report
    # a server that found more than the trace encodes drifts too
    assert _replay(cached_b=48, counted=48.0).drift
