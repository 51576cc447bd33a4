"""The "Step and floor" section renders the evaluation's rows, and nothing without them."""

from __future__ import annotations

from kvlab.analysis.step_floor import PointStep
from kvlab.report.step_floor import section_body


def test_a_kvlab_row_and_a_vllm_row() -> None:
    kvlab = PointStep("kvlab-bfloat16", 256, "c=16", 32, 60.0, 50.0, 40, 16.0, 25.0,
                      {"head": 20.0, "sample": 1.5})
    vllm = PointStep("vllm", 256, "c=16", 32, 70.0, None, 0, None, None, {}, 68.0, 3.0)
    text = section_body([kvlab, vllm])
    assert ("| kvlab-bfloat16 | c=16 | 32 | 60.0 | 50.0 | 16.0 | 25.0 | 1.20× | 2.00× "
            "| — | — |") in text
    assert "| vllm | c=16 | 32 | 70.0 | — | — | — | — | — | 68.0 | 3.0 |" in text
    assert "| kvlab-bfloat16 | c=16 | 20.00 | 1.50 |" in text  # phases: kvlab only


def test_no_rows_no_section() -> None:
    assert section_body([]) == ""
