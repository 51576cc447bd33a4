"""A run's groups under each tool's definitions, and what evaluation.json keeps of them."""

from __future__ import annotations

import pytest

from kvlab.analysis import definition_cells as dc
from kvlab.analysis.valid_rows import judge
from tests.rows import row


def test_cells_group_valid_rows_and_evaluation_block() -> None:
    rows = [row(query_id="q1"), row(query_id="q2", output_tokens=63),  # refused
            row(query_id="q1", mode="b", capacity=2048)]
    found = dc.cells(judge(rows), ["kvlab", "vllm"])
    assert [(c.mode, c.capacity, c.rows) for c in found] == [("a", 512, 1), ("b", 2048, 1)]
    block = dc.evaluation_block(found, ["vllm"])
    assert list(block["sets"]) == ["kvlab", "vllm"]
    assert "serve.py" in block["sets"]["vllm"]["source"]
    first = block["cells"][0]["definitions"]
    assert first["kvlab"]["e2e_ms"]["median"] == pytest.approx(1000.0)
    assert first["vllm"]["output_tokens_per_s"] == pytest.approx(64.0)
