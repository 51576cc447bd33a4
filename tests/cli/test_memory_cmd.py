import json
import subprocess
import sys

import pytest

from kvlab.cli import main


def run(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """Run ``kvlab memory ARGS`` in-process through the real entry point."""
    monkeypatch.setattr(sys, "argv", ["kvlab", "memory", *args])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exc:
        main()
    captured = capsys.readouterr()
    return exc.value.code or 0, captured.out, captured.err


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_default_prints_the_notebook_projections(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys)
    assert code == 0
    for gib in ("0.250", "1.000", "4.000", "0.109", "0.438", "1.750"):
        assert f" {gib} " in out
    assert "bf16/bf16" in out


def test_json_projections(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "--json", "-p", "qwen2.5-7b", "-L", "2048",
                       "-L", "32768")  # fmt: skip
    doc = last_json(out)
    assert code == 0 and doc["mode"] == "formula" and doc["type_k"] == "bf16"
    (model,) = doc["models"]
    assert model["shape"]["kv_heads"] == 4
    assert [r["bytes"] for r in model["rows"]] == [117_440_512, 1_879_048_192]


def test_measure_toy(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "-p", "toy", "-L", "192", "--dtype", "f32",
                       "--measure", "--json")  # fmt: skip
    row = last_json(out)["models"][0]["rows"][0]
    assert code == 0
    assert (row["bytes"], row["measured_bytes"], row["matches"]) == (737_280, 737_280, True)
    assert row["measure_method"] == "kvlab.engine.KVCache"


def test_llamacpp_gemma(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "-p", "gemma-3-270m", "-L", "4096", "--llamacpp",
                       "--slots", "1")  # fmt: skip
    assert code == 0
    assert "non-SWA" in out and " 1024 " in out and "15.00" in out and "27.00" in out
    _, out, _ = run(monkeypatch, capsys, "-p", "gemma-3-270m", "-L", "4096", "--llamacpp",
                    "--json", "--type-k", "q8_0")  # fmt: skip
    doc = last_json(out)
    assert (doc["type_k"], doc["type_v"]) == ("q8_0", "f16")
    caches = doc["models"][0]["rows"][0]["caches"]
    assert [c["cells"] for c in caches] == [4096, 1024]
    assert caches[0]["k_bytes"] == 3 * 8 * 34 * 4096


def test_compare_mha(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "-p", "llama-3.1-8b", "-L", "8192",
                       "--compare-mha")  # fmt: skip
    assert code == 0 and "not the whole VRAM" in out
    _, out, _ = run(monkeypatch, capsys, "-p", "llama-3.1-8b", "-L", "8192", "--compare-mha",
                    "--json")  # fmt: skip
    assert last_json(out)["models"][0]["compare_mha"]["rows"][0]["ratio"] == 4.0


def test_config_and_gguf_sources(monkeypatch, capsys, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 4,
                               "hidden_size": 256}))  # fmt: skip
    code, out, _ = run(monkeypatch, capsys, "--config", str(cfg), "-L", "100", "--json")
    assert code == 0
    assert last_json(out)["models"][0]["rows"][0]["bytes"] == 2 * 2 * 4 * 64 * 100 * 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "nope"], "unknown model preset 'nope'; valid presets: toy"),
        (["-L", "0"], "must be positive"),
        (["--seqs", "-1"], "must be positive"),
        (["--dtype", "q3"], "unknown cache type"),
        (["--gguf", "/nonexistent/m.gguf"], "does not exist"),
        (["-p", "toy", "--measure", "--llamacpp"], "drop --llamacpp"),
        (["-p", "toy", "--dtype", "q8_0", "--type-k", "f16", "--measure"], "one type"),
    ],
)
def test_bad_input_is_one_line_exit_2(monkeypatch, capsys, args, message):
    code, _, err = run(monkeypatch, capsys, *args)
    assert code == 2
    assert err.startswith("error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_config_files(monkeypatch, capsys, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{oops")
    code, _, err = run(monkeypatch, capsys, "--config", str(bad))
    assert code == 2 and "not valid JSON" in err
    bad.write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 8,
                               "num_key_value_heads": 3, "head_dim": 64}))  # fmt: skip
    code, _, err = run(monkeypatch, capsys, "--config", str(bad))
    assert code == 2 and "does not divide" in err and err.count("\n") == 1
    not_gguf = tmp_path / "m.gguf"
    not_gguf.write_bytes(b"\x00" * 64)
    code, _, err = run(monkeypatch, capsys, "--gguf", str(not_gguf))
    assert code == 2 and "not a GGUF" in err


def test_console_script_error_path():
    proc = subprocess.run(
        [sys.executable, "-m", "kvlab", "memory", "--preset", "nope"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: unknown model preset") and "Traceback" not in proc.stderr


def test_paged_mix_checked_against_the_engine_pool(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "-p", "gemma-3-270m", "--paged", "16",
                       "--seqs", "300,1800,4000", "-L", "4096", "--dtype", "f16",
                       "--measure", "--json")
    assert code == 0
    row = last_json(out)["models"][0]["rows"][0]
    assert row["matches"] is True and row["lengths"] == [300, 1800, 4000]
    assert row["measured_blocks_global"] == row["blocks_global"] == 19 + 113 + 250
    assert 0 < row["waste"] < row["contiguous_unused"]


def test_a_list_of_lengths_needs_paged(monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "-p", "toy", "--seqs", "100,200")
    assert code != 0 and "--seqs with a list of lengths needs --paged BLOCK" in err


def test_paged_lengths_from_a_runs_records(monkeypatch, capsys, tmp_path):
    from kvlab.rundir import Outcome, RecordStore
    from tests.rows import row

    path = tmp_path / "records.jsonl"
    with RecordStore(path) as store:
        store.append(row(prompt_tokens=250, output_tokens=64))  # 313 tokens held
        store.append(row(prompt_tokens=100, output_tokens=30))  # 129
        store.append(row(prompt_tokens=100, output_tokens=30, warmup=True))  # left out
        store.append(row(outcome=Outcome.TIMEOUT, error="late"))  # left out
    code, out, _ = run(monkeypatch, capsys, "-p", "toy", "--paged", "16", "--records",
                       str(path), "--dtype", "f32", "--budget-mib", "2", "--json")
    assert code == 0
    doc = last_json(out)["models"][0]["rows"][0]
    assert doc["capacity"] == 512 and doc["lengths"] == [313, 129]
    assert doc["blocks_global"] == 20 + 9
    # f32 toy KV is 3,840 B/token. A 512-token slot takes 1,966,080 B: one fits in 2 MiB.
    assert doc["max_seqs_contiguous"] == 1
    # Paged: 20 + 9 blocks of 16 tokens = 1,781,760 B; a third (313 again) does not fit.
    assert doc["max_seqs_paged"] == 2


def test_a_budget_must_be_positive(monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "-p", "toy", "--paged", "16", "--budget-mib", "-1")
    assert code == 2 and "--budget-mib must be positive, got -1" in err


def test_out_writes_the_document_with_the_machine(monkeypatch, capsys, tmp_path):
    """--out: what --json prints, plus the command line and the machine (CPU, cores,
    load average at the end), for kvlab summary to read back."""
    saved = tmp_path / "memory" / "toy.json"
    code, out, _ = run(monkeypatch, capsys, "-p", "toy", "-L", "192", "--dtype", "f32",
                       "--measure", "--out", str(saved), "--json")
    assert code == 0
    doc = json.loads(saved.read_text())
    machine = doc.pop("machine")
    assert doc.pop("argv") == ["kvlab", "memory", "-p", "toy", "-L", "192", "--dtype", "f32",
                               "--measure", "--out", str(saved), "--json"]
    assert doc == last_json(out)
    assert machine["cores"] >= 1 and machine["cpu"] and len(machine["load_average"]) == 3
    code, _, err = run(monkeypatch, capsys, "-p", "toy", "--out", str(tmp_path))  # a folder
    assert code == 2 and err.startswith(f"error: --out {tmp_path}: cannot write")
    assert err.count("\n") == 1


# -- --knee ------------------------------------------------------------------------------

GEMMA_WORK = ("-p", "gemma-3-270m", "--prompt-tokens", "192", "--output-tokens", "64")


def test_knee_vllm_one_row_per_budget(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "--knee", "vllm", "--kv-blocks", "79,121",
                       *GEMMA_WORK, "--json")  # fmt: skip
    doc = last_json(out)
    assert code == 0 and doc["mode"] == "knee" and doc["workload"]["kv_tokens"] == 255
    rows = doc["models"][0]["rows"]
    assert [(r["fits"], r["first_past"], r["past"]) for r in rows] == [
        (6, 7, "queue"), (10, 11, "queue")]
    assert [r["capacity"] for r in rows] == [78, 120]  # the null block is not usable


def test_knee_vllm_from_a_kv_space_stops_at_max_num_seqs(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "--knee", "vllm", "--kv-space-gib", "1",
                       *GEMMA_WORK, "--json")  # fmt: skip
    (row,) = last_json(out)["models"][0]["rows"]
    assert code == 0 and row["budget"] == "1 GiB = 2730 blocks"
    assert (row["fits"], row["bound"]) == (128, "slots")


def test_knee_reads_the_budget_from_saved_metrics(monkeypatch, capsys, tmp_path):
    vllm_metrics = tmp_path / "vllm.txt"
    vllm_metrics.write_text('vllm:cache_config_info{block_size="128",engine="0",'
                            'num_gpu_blocks="79"} 1.0\n')
    code, out, _ = run(monkeypatch, capsys, "--knee", "vllm", "--metrics", str(vllm_metrics),
                       *GEMMA_WORK, "--json")  # fmt: skip
    assert code == 0 and last_json(out)["models"][0]["rows"][0]["fits"] == 6
    kvlab_metrics = tmp_path / "kvlab.txt"
    kvlab_metrics.write_text('kvlab:kv_blocks_total{model_name="gemma-3-270m"} 160\n')
    code, out, _ = run(monkeypatch, capsys, "--knee", "embedded", "--metrics",
                       str(kvlab_metrics), *GEMMA_WORK, "--json")  # fmt: skip
    (row,) = last_json(out)["models"][0]["rows"]
    assert code == 0 and (row["fits"], row["past"], row["per_seq"]) == (10, "preempt", 16)
    # the embedded kind's old spelling still reads, with one deprecation line
    code, old, err = run(monkeypatch, capsys, "--knee", "kvlab", "--metrics",
                         str(kvlab_metrics), *GEMMA_WORK, "--json")  # fmt: skip
    assert code == 0 and last_json(old)["models"] == last_json(out)["models"]
    assert "--knee kvlab is deprecated; write --knee embedded" in err


def test_knee_llamacpp_table(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "--knee", "llamacpp", "-L", "3072", "--slots",
                       "6", *GEMMA_WORK)  # fmt: skip
    assert code == 0
    line = next(x for x in out.splitlines() if "-c 3072 -np 6" in x and "│" in x)
    cells = [c.strip() for c in line.split("│") if c.strip()]
    assert cells[5:9] == ["6", "7", "queue", "slots"]
    assert "request 7 waits for a free slot" in out.replace("\n", " ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--kv-blocks", "79"), "go with --knee SERVER"),
        (("--knee", "vllm", *GEMMA_WORK), "needs one KV budget"),
        (("--knee", "llamacpp", "--kv-blocks", "79", *GEMMA_WORK), "not --kv-blocks"),
        (("--knee", "vllm", "--kv-blocks", "79", "--llamacpp", *GEMMA_WORK), "drop --llamacpp"),
        (("--knee", "vllm", "--kv-blocks", "79", "-p", "gemma-3-270m"), "--prompt-tokens N"),
        (("--knee", "tgi", "--kv-blocks", "79", *GEMMA_WORK),
         "no such server kind; give one of embedded, llamacpp, vllm"),
        (("--knee", "external", "--kv-blocks", "79", *GEMMA_WORK),
         "'external': the kind declares no KV pool (kv_pool); give one of"),
        (("--knee", "vllm", "--kv-blocks", "10", *GEMMA_WORK), "raise num_gpu_blocks"),
        (("--knee", "vllm", "--metrics", "/nonexistent", *GEMMA_WORK), "no such file or URL"),
    ],
)
def test_knee_bad_input_is_one_line(monkeypatch, capsys, args, message):
    code, _, err = run(monkeypatch, capsys, *args)
    assert code == 2
    assert err.startswith("error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
