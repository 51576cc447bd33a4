"""report.html: one self-contained file, checked as text and in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kvlab.report.html import render_html, write_html
from kvlab.rundir import load_run
from kvlab.servers.kvlog import LoggedKvCache, PredictedKvCache, build_check
from tests.report.synthetic_runs import make_row, two_mode_rows, write_run

HEADINGS = ["Protocol", "Metric definitions", "Validation", "Summaries per (mode, capacity)",
            "Comparisons (ratio = mean A / mean B at equal capacity)",
            "Comparisons with 95 % intervals and verdicts", "Figures",
            "KV check: predicted vs allocated by llama-server", "Manifest essentials"]


def _kv_check() -> dict[str, object]:
    predicted = [PredictedKvCache(kind="kv", cells=256, layers=3, k_bytes=98304,
                                  v_bytes=98304)]
    logged = [LoggedKvCache(kind="kv", cells=256, layers=3, n_seq_max=1, n_stream=1,
                            type_k="f16", type_v="f16", size_mib=0.19, k_mib=0.09, v_mib=0.09)]
    return build_check(predicted, logged).model_dump(mode="json")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = two_mode_rows(n=6, capacities=(256, 1024))
    rows.append(make_row("fast", 256, 9, prefill=10, decode=20, output_tokens=5))  # refused
    manifest = {"run_id": "r1", "servers": [
        {"mode": "slow", "capacity": 256, "facts": {"kind": "llamacpp",
                                                    "kv_check": _kv_check()}}]}
    run = write_run(tmp_path_factory.mktemp("html") / "run", rows, manifest)
    return write_html(run, resamples=200)


def test_sections_numbers_and_no_external_resource(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    for heading in HEADINGS:
        assert f"<h2>{heading}</h2>" in text
    assert "<h3>slow (A) vs fast (B) — capacity 256, sequential</h3>" in text
    assert "fast faster" in text and "no detectable difference" in text
    assert "output_tokens" in text and "5 output tokens, 8 requested" in text  # the refusal
    assert "<td>6 of 7</td><td>1 output_tokens</td>" in text  # what each summary stands on
    assert text.count('src="data:image/png;base64,') >= 3
    assert "<details><summary>manifest.json</summary>" in text
    # Self-contained: no link, script or stylesheet fetched from anywhere.
    assert not re.search(r'(src|href)\s*=\s*"(?!data:)', text)
    assert "<script" not in text and "url(" not in text and "@import" not in text


def test_load_points_and_what_they_stand_on(tmp_path: Path) -> None:
    rows = [make_row("a", 256, q, prefill=10, decode=20, load="c=2", start_ms=50.0 * (q // 2),
                     **({"output_tokens": 7} if q % 2 else {})) for q in range(6)]
    text = render_html(load_run(write_run(tmp_path / "run", rows)), resamples=100)
    assert "<h2>Load</h2>" in text
    assert "<td>3 of 6</td><td>3 output_tokens</td>" in text


def test_kv_check_mismatch_is_shown(tmp_path: Path) -> None:
    check = _kv_check()
    check["caches"][0]["logged"]["cells"] = 512  # type: ignore[index]
    run = write_run(tmp_path / "run", two_mode_rows(n=5, capacities=(256,)),
                    {"servers": [{"facts": {"kv_check": check}}]})
    text = render_html(load_run(run), resamples=100)
    assert "KV check" in text and "256 / 512" in text


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt install chromium)")
def test_opens_offline_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    flags = [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    url = report.resolve().as_uri()
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True,
                         timeout=90, check=True).stdout
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', dom)
    assert {alt for alt, _ in images} >= {"Phase bars", "Latency distributions",
                                          "TTFT and ITL against prompt length"}
    assert all(len(data) > 1000 for _, data in images)
    for heading in HEADINGS:
        assert f"<h2>{heading}</h2>" in dom
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,3000", url],
                   capture_output=True, timeout=90, check=True)
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 50_000
