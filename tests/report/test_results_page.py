"""The one page of results: every headline read from the step's own file, a line for
each missing step, the machine and its load; index.html checked as text and in
headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
from html import escape
from pathlib import Path

import pytest

from kvlab.errors import ConfigError
from kvlab.report.results_html import render_index, write_index
from kvlab.report.results_page import page_text, results_page
from tests.report.results_folder import INVOCATION_LOADS, build_results
from tests.report.test_html import CHROMIUM


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return build_results(tmp_path_factory.mktemp("results"), monkeypatch)


def _json(path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(path.read_text(encoding="utf-8"))


def _comparison(results: Path, name: str, a: str, metric: str) -> dict:  # type: ignore[type-arg]
    evaluation = _json(next((results / "runs").glob(f"{name}-*")) / "evaluation.json")
    return next(c["metrics"][metric] for c in evaluation["comparisons"] if c["a"] == a)


def test_every_headline_is_read_from_its_file(results: Path) -> None:
    page = results_page(results)
    by_step = {h.step.split(" (")[0]: h for h in page.headlines}
    text = page_text(page)

    bench = _json(results / "kv-bench" / "kv-bench.json")
    row = bench["rows"][-1]  # no 2048-token row here: the largest context, named
    kv = by_step["KV cache in the engine"]
    assert kv.source == "kv-bench/kv-bench.json"
    assert f"at {row['context']} tokens" in kv.text
    assert f"naive {row['naive_decode_s_per_token'] * 1e3:.2f} ms" in kv.text
    assert f"{row['decode_speedup']:.1f}x" in kv.text
    assert kv.load == [bench["machine"]["load_average"][0]]

    measured = _json(results / "memory" / "toy-measured.json")["models"][0]["rows"][0]
    assert measured["measured_bytes"] == measured["bytes"] == 737_280
    assert "measured 737,280 B = formula 737,280 B" in by_step["KV bytes, measured vs formula"].text

    itl = _comparison(results, "quickstart", "recompute", "itl_effective_ms")
    quick = by_step["Recompute vs KV cache, embedded server"]
    assert f"recompute {itl['mean_a']:.2f} ms vs KV cache {itl['mean_b']:.2f} ms" in quick.text
    assert f"ratio {itl['ratio']:.2f}" in quick.text and "KV cache faster" in quick.text
    assert quick.load == [INVOCATION_LOADS[0][0], INVOCATION_LOADS[1][0]]

    engine = _comparison(results, "gemma-embedded-vs-llamacpp", "kv-cache", "itl_effective_ms")
    assert f"engine {engine['mean_a']:.2f} ms vs llama-server {engine['mean_b']:.2f} ms" in \
        by_step["Engine vs llama-server, Gemma 3 270M"].text

    e2e = _comparison(results, "llamacpp-cpu", "t1", "e2e_ms")
    assert f"t1 {e2e['mean_a']:.2f} ms vs t2 {e2e['mean_b']:.2f} ms" in by_step["llamacpp-cpu"].text

    evaluation = _json(next((results / "runs").glob("continuous-batching-*")) / "evaluation.json")
    rate = {p["mode"]: p["output_tokens_per_s"] for p in evaluation["load"]}
    assert rate["one-slot"] == pytest.approx(16 * 8 / 1.6)  # 16 rows of 100 ms, one slot
    assert f"{rate['batching'] / rate['one-slot']:.2f}x" in \
        by_step["Continuous batching vs one slot"].text
    assert f"one slot {rate['one-slot']:.1f} (16 valid of 16)" in \
        by_step["Continuous batching vs one slot"].text

    paged = _json(results / "memory" / "paged.json")["models"][0]["rows"][0]
    assert (f"{paged['waste']:.1%} of paged blocks unfilled vs "
            f"{paged['contiguous_unused']:.1%} of contiguous slots unused") in \
        by_step["Paged vs contiguous KV"].text

    notebook = _json(next((results / "runs").glob("vllm-notebook-*")) / "evaluation.json")
    cells = sorted(notebook["summaries"], key=lambda c: c["capacity"])
    line = by_step["The notebook's section 6 on a launched vLLM"].text
    assert ("at " + " / ".join(f"{c['mean_prompt_tokens']:.0f}" for c in cells)
            + " prompt tokens: TTFT "
            + " / ".join(f"{c['ttft_ms']['median']:.0f}" for c in cells)) in line
    assert "prefix reuse" in line and "rows 3 valid of 3; 3 valid of 3" in line

    servers = _json(next((results / "runs").glob("serving-engines-*")) / "evaluation.json")
    rate = {p["mode"]: p["output_tokens_per_s"] for p in servers["load"]}
    assert rate["vllm"] == pytest.approx(16 * 8 / 0.4)  # two rounds of 200 ms
    assert rate["llama-server"] == pytest.approx(8 * 8 / 0.8)  # its 8 valid rows only
    line = by_step["vLLM vs llama-server vs kvlab serve"].text
    assert (f"vllm {rate['vllm']:.1f} (16 valid of 16), llama-server "
            f"{rate['llama-server']:.1f} (8 valid of 16 (refused: 8 output_tokens))") in line
    assert f"kvlab serve / vLLM = {rate['kvlab-serve'] / rate['vllm']:.2f}x" in line

    peers = by_step["Four clients on one known schedule"]
    assert peers.source == "crosscheck/crosscheck.json" and peers.load == [1.5, 1.75]
    assert ("kvlab run TTFT +1.26 [+0.76, +1.76], ITL +0.02; GuideLLM TTFT +2.29 "
            "[+1.79, +2.79], ITL +0.02") in peers.text
    assert "(`kvlab peers crosscheck`)" in peers.text

    for h in page.headlines:  # every line names the file it was read from
        assert h.source and h.source in text and (results / h.source).is_file()
    assert [h.step.split(" (")[0] for h in page.headlines][-4:] == [
        "Continuous batching vs one slot", "The notebook's section 6 on a launched vLLM",
        "vLLM vs llama-server vs kvlab serve", "Four clients on one known schedule"]


def test_machine_and_load_during_the_run(results: Path) -> None:
    page = results_page(results)
    bench = _json(results / "kv-bench" / "kv-bench.json")
    assert page.cpu == bench["machine"]["cpu"] and page.cores == bench["machine"]["cores"]
    loads = [x for h in page.headlines for x in h.load]
    assert set(INVOCATION_LOADS[1][:1]) <= set(loads)
    low, high = page.load_range or (0, 0)
    assert (low, high) == (min(loads), max(loads))
    assert f"{low:.2f}–{high:.2f}" in page.machine_line()


def test_missing_steps_say_so(tmp_path: Path) -> None:
    page = results_page(tmp_path)
    assert len(page.headlines) == 9
    assert all("step not run" in h.text and h.source is None for h in page.headlines)
    assert "load average not recorded" in page.machine_line()
    with pytest.raises(ConfigError, match="no such folder"):
        results_page(tmp_path / "nope")


def test_a_file_of_another_shape_is_a_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "crosscheck").mkdir()
    (tmp_path / "crosscheck" / "crosscheck.json").write_text('{"clients": 1}')
    peers = results_page(tmp_path).headlines[-1]
    assert "not a cross-check kvlab can read" in peers.text and "rerun" in peers.text
    (tmp_path / "kv-bench").mkdir()
    (tmp_path / "kv-bench" / "kv-bench.json").write_text('{"rows": [{"context": 2048}]}')
    kv = results_page(tmp_path).headlines[0]
    assert kv.step.startswith("KV cache in the engine")
    assert ("lacks what this page reads (rows.0.naive_decode_s_per_token: Field required)"
            in kv.text and kv.source == "kv-bench/kv-bench.json")


def test_a_run_evaluated_before_valid_row_figures_is_named_not_read(results: Path) -> None:
    path = next((results / "runs").glob("serving-engines-*")) / "evaluation.json"
    kept = path.read_text(encoding="utf-8")
    try:
        path.write_text(json.dumps(_json(path) | {"schema_version": 1}))
        line = next(h for h in results_page(results).headlines
                    if h.step.startswith("vLLM vs llama-server")).text
    finally:
        path.write_text(kept, encoding="utf-8")
    assert line.startswith("its evaluation.json counts refused rows in its load figures")


def test_index_links_every_report_and_fetches_nothing(results: Path) -> None:
    page = results_page(results)
    html = render_index(page)
    expected = []  # each run's report.html, else its report.md
    for run in sorted((results / "runs").iterdir()):
        html_file = run / "report.html"
        expected.append(str((html_file if html_file.is_file() else run / "report.md")
                            .relative_to(results)))
    assert [r for r in page.reports if r.startswith("runs/")] == expected
    assert sum(r.endswith(".html") for r in expected) == 2
    for path in [*page.reports, "memory/paged.json", "kv-bench/kv-bench.png"]:
        assert f'href="{path}"' in html
    for h in page.headlines:
        assert escape(h.text) in html
    assert not re.search(r'src\s*=\s*"(?!data:)', html)
    assert not re.search(r'href\s*=\s*"(https?:|//)', html)
    assert "<script" not in html and "url(" not in html and "@import" not in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt install chromium)")
def test_index_opens_in_headless_chromium(results: Path, tmp_path: Path) -> None:
    page = results_page(results)
    index = write_index(page)
    flags = [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", index.resolve().as_uri()], capture_output=True,
                         text=True, timeout=90, check=True).stdout
    assert "<h2>Headline figures</h2>" in dom and "<h2>Reports</h2>" in dom
    # the header, then one row per headline (kv-bench, measured, each run's, paged,
    # the cross-check's, ...): the browser drops none
    assert len(page.headlines) >= 9
    assert dom.count("<tr>") == 1 + len(page.headlines)
    assert "measured 737,280 B = formula 737,280 B" in dom
    links = re.findall(r'<a href="([^"]+)"', dom)
    assert all((results / link).is_file() for link in links) and len(links) >= 10
    image = re.search(r'<img alt="kv-bench[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)"',
                      dom)
    assert image is not None and len(image.group(1)) > 1000
    shot = tmp_path / "index.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,1600",
                    index.resolve().as_uri()], capture_output=True, timeout=90, check=True)
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
