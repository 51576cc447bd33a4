"""The report section "The same run under other tools' definitions" (md and html)."""

from __future__ import annotations

from kvlab.analysis.definition_cells import cells
from kvlab.analysis.valid_rows import judge
from kvlab.report.html import render_html
from kvlab.report.peer_definitions import TITLE, definitions_markdown, section_body
from kvlab.rundir import load_run
from tests.report.synthetic_runs import make_row, two_mode_rows, write_run


def test_one_table_per_capacity_with_every_definition() -> None:
    rows = two_mode_rows(n=5, capacities=(256, 1024))
    text = definitions_markdown(cells(judge(rows)))
    assert text.lstrip().startswith(f"## {TITLE}")
    assert text.count("| mode | metric | kvlab | vllm | guidellm | aiperf |") == 2
    assert "Capacity 256 (valid rows:" in text and "Capacity 1024 (valid rows:" in text
    assert "They differ by definition" in text
    assert "guidellm: GuideLLM 0.8.1" in text and "aiperf: AIPerf 0.13.0" in text
    # kvlab has no TPOT: an em dash, never a number made up for it.
    tpot = [line for line in text.splitlines() if "| TPOT ms |" in line]
    assert tpot and all(line.split("|")[3].strip() == "—" for line in tpot)


def test_no_valid_row_says_so() -> None:
    refused = make_row("a", 256, 1, prefill=10.0, decode=20.0, output_tokens=3)
    assert "No valid row to compute them from." in section_body(cells(judge([refused])))


def test_html_report_has_the_section(tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = write_run(tmp_path / "run", two_mode_rows(n=5, capacities=(256,)))
    html = render_html(load_run(run), resamples=200)
    assert f"<h2>{TITLE}</h2>".replace("'", "&#x27;") in html
    assert "<th>guidellm</th>" in html
