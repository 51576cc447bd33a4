"""The "Server histograms" section of report.md and report.html."""

from __future__ import annotations

from kvlab.analysis.server_histograms import point_histograms
from kvlab.report.server_histograms import TITLE, section_body, server_histograms_markdown
from tests.analysis.test_server_histograms import FakeVllm, rows_with_ttft


def _points(*client_ms: float):  # type: ignore[no-untyped-def]
    vllm = FakeVllm()
    start = vllm.reading("start", 1)
    vllm.observe(0.12, 0.13, 0.2, 0.3)
    end = vllm.reading("end", 5)
    return point_histograms(rows_with_ttft(*client_ms), [start, end])


def test_the_section_puts_the_servers_quantiles_beside_the_clients() -> None:
    text = server_histograms_markdown(_points(150, 160, 230, 330))
    assert text.startswith(f"\n## {TITLE}\n")
    assert "a @ 512 c=2 (4 answered requests):" in text
    ttft = next(line for line in text.splitlines() if line.startswith("| TTFT |"))
    cells = [c.strip() for c in ttft.strip("|").split("|")]
    assert cells[:3] == ["TTFT", "4", "187.5"]
    assert cells[3] == "200 (100, 250]"  # rank 2 of the bucket's 3: 100 + 150 × 2/3
    assert cells[6:] == ["4", "195", "300", "327"]
    assert "No point's client TTFT is below the server's own" in text


def test_a_flagged_point_says_so() -> None:
    text = section_body(_points(20, 30, 40, 90))
    assert "**Flagged:** a @ 512 c=2: the client's TTFT p50 35 ms is below vLLM's own" in text


def test_no_histograms_no_section() -> None:
    assert server_histograms_markdown([]) == ""
