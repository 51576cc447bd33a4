"""kvlab calibrate from the command line: --json contract and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _kvlab(*args: str, env_file: Path) -> subprocess.CompletedProcess[str]:
    env = {"KVLAB_CALIBRATION": str(env_file), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "kvlab", *args], capture_output=True, text=True, timeout=60,
        env=env,
    )


def test_calibrate_json_last_line_and_saved_limits(tmp_path: Path) -> None:
    cal = tmp_path / "cal.json"
    out = _kvlab("calibrate", "--json", "--concurrency", "2", "--duration-s", "0.1",
                 "--itl-ms", "10", "--tokens", "4", "--ingest-streams", "2", "--ramp", "200",
                 "--ingest-duration-s", "0.2", "--ramp-duration-s", "0.3",
                 env_file=cal)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["accuracy"][0]["concurrency"] == 2
    assert doc["accuracy"][0]["errors"]["events"] > 0
    assert {i["client"] for i in doc["ingest"]} == {"kvlab", "kvlab-aiohttp", "aiohttp-baseline"}
    if doc["max_events_per_s"] is not None:
        assert doc["calibration_file"] == str(cal)
        assert json.loads(cal.read_text())["max_events_per_s"] == doc["max_events_per_s"]


@pytest.mark.parametrize("args", [["--concurrency", "a,b"], ["--api", "grpc"],
                                  ["--duration-s", "0"]])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str]) -> None:
    out = _kvlab("calibrate", *args, env_file=tmp_path / "c.json")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stderr.startswith("error:")
