"""engine-batch and engine-speed through the real entry point (kvlab.cli.main): their
refusals, and one short real run (its timings are printed, never asserted)."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_engine_cmds import _run


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["engine-batch", "--dtypes", "fp8"], "unknown weight format 'fp8'"),
        (["engine-batch", "--batch-sizes", "0"], "--batch-sizes: 0 must be positive"),
        (["engine-batch", "--repeats", "0"], "must be positive"),
        (["engine-speed", "--dtype", "fp8"], "unknown weight format 'fp8'"),
        (["engine-speed", "--against", "vllm"], "--against takes transformers"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, fragment, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    code, _, err = _run(args, monkeypatch, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]


@pytest.mark.slow
def test_engine_batch_measures_each_format_and_batch(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import llama_server_missing

    if llama_server_missing():  # the bundled model comes with it
        pytest.skip(llama_server_missing())
    code, out, _ = _run(["engine-batch", "--dtypes", "float32,int8", "--batch-sizes", "1,2",
                         "--repeats", "1", "--fidelity-tokens", "16", "--json"],
                        monkeypatch, capsys)
    assert code == 0
    doc = json.loads(out.strip().splitlines()[-1])
    assert [(r["dtype"], r["batch"]) for r in doc["rows"]] == [
        ("float32", 1), ("float32", 2), ("int8", 1), ("int8", 2)]
    # each format's agreement with float32 on the real model: tests/engine/test_weights_gemma.py
    assert set(doc["fidelity"]["formats"]) == {"float32", "int8"}
    assert doc["copy_gb_per_s"] > 0 and doc["load_average"]
    by = {r["dtype"]: r["bytes_per_step"] for r in doc["rows"] if r["batch"] == 1}
    assert by["int8"] < by["float32"] / 3  # a quarter of the weight bytes, plus K/V
