"""engine-profile through the real entry point: its refusals, and one short real run on
Gemma 3 270M whose torch.profiler check must pass (timings printed, never asserted)."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_engine_cmds import _run


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["engine-profile", "--dtypes", "fp8"], "unknown weight format 'fp8'"),
        (["engine-profile", "--batch-sizes", "0"], "--batch-sizes: 0 must be positive"),
        (["engine-profile", "--steps", "0"], "must be positive"),
        (["engine-profile", "--trace-batch", "-1"], "--trace-batch at least 0"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, fragment, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    code, _, err = _run(args, monkeypatch, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]


@pytest.mark.slow
def test_engine_profile_breaks_each_step_down_and_agrees_with_torch_profiler(
        tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import llama_server_missing

    if llama_server_missing():  # the bundled model comes with it
        pytest.skip(llama_server_missing())
    code, out, _ = _run(["engine-profile", "--dtypes", "bfloat16", "--batch-sizes", "1,4",
                         "--steps", "2", "--trace-batch", "4", "--out", str(tmp_path),
                         "--json"], monkeypatch, capsys)
    assert code == 0
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc == json.loads((tmp_path / "engine-profile.json").read_text())
    (fmt,) = doc["formats"]
    assert fmt["dtype"] == "bfloat16" and fmt["floor_ms"] > 0
    assert [s["batch"] for s in fmt["steps"]] == [1, 4]
    groups = {"layers 0-5", "layers 6-11", "layers 12-17"}
    for step in fmt["steps"]:
        assert groups | {"schedule", "batch", "embed", "gather", "head", "sample"} \
            <= set(step["phases_ms"])
        # the copy bandwidth measured again after each of the 2 timed steps
        assert len(step["paired_copy_gb_per_s"]) == 2 and step["paired_floor_ratio"] > 0
    trace = fmt["trace"]
    assert trace["batch"] == 4 and trace["agreement"] == {
        "relative": 0.05, "absolute_ms": 0.25, "per_range_ms": 0.02}
    # each phase's clock time within 5 % or 0.25 ms (+ 0.02 ms per range of it) of the
    # profiler's range, medians of 3 traced steps
    assert trace["agrees"], trace["phases"]
    head = next(p for p in trace["phases"] if p["phase"] == "head")
    assert head["ops_ms"] > 0.5 * head["profiler_ms"]  # the head is its matrix product
