"""CLI: one-line errors (exit 2, no traceback), explain, evaluate on a saved run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvlab.rundir import RecordStore
from tests.experiments import embedded, experiment, synthetic
from tests.rows import MS, row

QUICK = str(Path(__file__).parents[2] / "experiments" / "quickstart.toml")
SWEEP = str(Path(__file__).parents[2] / "experiments" / "load-sweep.toml")


def kvlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvlab", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "no-such.toml"], "cannot read the experiment file"),
        (["evaluate", "/nonexistent-run"], "is not a run directory"),
        (["explain", "--", "-1"], "must be positive"),
        (["run", QUICK, "--queries", "0"], "--queries must be within 1..30"),
        (["run", QUICK, "--queries", "31"], "--queries must be within 1..30"),
        (["run", QUICK, "--endpoint", "kv-cache=http://127.0.0.1:1"], "goes with --no-launch"),
        (["run", QUICK, "--no-launch", "--endpoint", "kv-cache=http://127.0.0.1:1"],
         "mode recompute (embedded) has no --endpoint"),
        (["run", QUICK, "--no-launch", "--endpoint", "nope=http://127.0.0.1:1"],
         "no such mode in quickstart (modes: recompute, kv-cache, recompute-openai, "
         "kv-cache-openai)"),
        (["run", QUICK, "--dry-run", "--repeat-aa", "nosuchmode"],
         "has no mode 'nosuchmode'"),
        (["run", QUICK, "--dry-run", "--queries", "31"], "--queries must be within 1..30"),
        (["run", "--dry-run", "--resume", "/nonexistent-run"], "--dry-run plans a new run"),
        (["run", QUICK, "--queries", "abc"], "Invalid value for '--queries'"),
        (["run", QUICK, "--set", "workload.capacitys=[256]"], "workload.capacitys: unknown key"),
        (["run", QUICK, "--set", "workload.capacities=[16]"], "capacity 16 leaves no room"),
        (["run", QUICK, "--set", "modes.nope.stream=false"], "no mode 'nope' (modes: recompute"),
        (["run", QUICK, "--set", "workload.queries=2", "--queries", "2"], "not both"),
        (["run", QUICK, "--set", "load.values=[1]", "--set", "load.values=[2]"],
         "--set gives load.values twice"),
        (["memory", "--ubatch", "abc"], "(see kvlab memory --help)"),
        (["memory", "-L", "abc"], "-L/--context: 'abc' is not a whole number"),
        (["nosuchcommand"], "No such command"),
        (["run", QUICK, "--workers", "2"], "this experiment's load is sequential"),
        (["run", SWEEP, "--ray-address", "127.0.0.1:1"], "say how many: --workers N"),
        (["run", SWEEP, "--workers-per-node", "2"], "give its --ray-address"),
        (["run", SWEEP, "--workers", "0"], "--workers must be >= 1"),
    ],
)
def test_one_line_errors(args, needle) -> None:
    result = kvlab(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in result.stderr


def test_workers_without_ray_say_how_to_install_it(tmp_path) -> None:
    """Where Ray is not installed, --workers is one line naming the extra; no run dir."""
    hide_ray = ("import sys; sys.modules['ray'] = None; sys.argv = ['kvlab', 'run', "
                f"{SWEEP!r}, '--workers', '2', '--out', {str(tmp_path)!r}]; "
                "from kvlab.cli import main; main()")
    result = subprocess.run([sys.executable, "-c", hide_ray], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'kvlab[ray]'" in lines[0], result.stderr
    assert list(tmp_path.iterdir()) == []


def test_dry_run_applies_queries_and_repeat_aa() -> None:
    result = kvlab("run", QUICK, "--dry-run", "--queries", "2", "--repeat-aa", "kv-cache",
                   "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout.strip().splitlines()[-1])["plan"]
    assert {m["name"] for m in plan["modes"]} == {"kv-cache", "kv-cache-again"}
    steps = [(s["step"], s.get("mode") or s["name"]) for s in plan["steps"]]
    assert {mode for _, mode in steps} == {"kv-cache", "kv-cache-again"}
    warm = [s["requests"] for s in plan["steps"] if s["step"] == "warmup"]
    rows = [len(s["rows"]) for s in plan["steps"] if s["step"] == "rows"]
    assert set(warm) == {1} and sum(rows) == 2 * 3 * 2  # 2 queries x 3 capacities x 2 modes


def test_set_is_measured_and_recorded(tmp_path) -> None:
    """A real run with --set: the rows follow the setting; manifest.json keeps it and the
    verbatim file, experiment.toml and report.md say it."""
    from kvlab.bench.calibrate.check import synthetic_process

    with synthetic_process() as url:
        path = experiment("set", synthetic(url), workload=dict(
            queries=2, capacities=[256], output_tokens=4, warmup=0)).write(tmp_path)
        result = kvlab("run", str(path), "--out", str(tmp_path / "runs"), "-q",
                       "--set", "workload.output_tokens=6", "--set", "workload.capacities=[512]")
    assert result.returncode == 0, result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["overrides"] == {"set": {"workload.output_tokens": 6,
                                             "workload.capacities": [512]}}
    assert manifest["experiment_file"] == path.read_text()
    assert "output_tokens = 6  # set by kvlab run --set" in (run / "experiment.toml").read_text()
    rows = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert {(r["capacity"], r["output_tokens"]) for r in rows} == {(512, 6)} and len(rows) == 2
    assert ("Overrides of this run (kvlab run): workload.output_tokens = 6, "
            "workload.capacities = [512]") in (run / "report.md").read_text()


def test_ctrl_c_mid_run_exits_130_with_the_resume_line(tmp_path) -> None:
    """SIGINT to a real `kvlab run` against the synthetic server (slow tokens: about a
    second a row), sent when the first of its six rows has landed."""
    import signal
    import time

    from kvlab.bench.calibrate.check import synthetic_process

    with synthetic_process() as url:
        path = experiment("slow", synthetic(url, ttft_ms=5, itl_ms=20), workload=dict(
            queries=6, capacities=[256], output_tokens=50, warmup=0)).write(tmp_path)
        process = subprocess.Popen([sys.executable, "-m", "kvlab", "run", str(path), "--out",
                                    str(tmp_path / "runs"), "-q"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        records = list((tmp_path / "runs").glob("*/records.jsonl"))
        while (not records or not records[0].read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
            records = list((tmp_path / "runs").glob("*/records.jsonl"))
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "resume with: kvlab run --resume" in lines[0]


def test_bad_experiment_is_one_line(tmp_path) -> None:
    path = tmp_path / "x.toml"
    path.write_text('name = "x"\n[[modes]]\nname = "a"\napi = "openai"\n')
    result = kvlab("run", str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {path}: modes[0].api: 'openai' is not one of "
        "llamacpp-completion, openai-chat, openai-completion, openai-responses, "
        "anthropic-messages, openai-embeddings"
    )


def test_explain() -> None:
    general = kvlab("explain").stdout
    assert "+25.00 %" in general and "16.67 %" in general
    assert "16.67 %" in kvlab("explain", "1.2").stdout


def test_evaluate_a_saved_run(tmp_path) -> None:
    run = tmp_path / "x-run"
    run.mkdir()
    experiment("x", embedded("a"), embedded("b"), compare=[("a", "b")]).write(
        run, "experiment.toml")
    with RecordStore(run / "records.jsonl") as store:
        for mode, end in (("a", 1200), ("b", 1000)):
            store.append(row(mode=mode, t_end=end * MS))
    result = kvlab("evaluate", str(run), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["comparisons"][0]["metrics"]["e2e_ms"]["ratio"] == pytest.approx(1.2)
    assert (run / "report.md").exists() and (run / "evaluation.json").exists()


def test_no_launch_with_nothing_listening_is_one_line(tmp_path) -> None:
    from tests.ports import refusing_url

    modes = ("recompute", "kv-cache", "recompute-openai", "kv-cache-openai")
    with refusing_url() as url:
        args = [a for m in modes for a in ("--endpoint", f"{m}={url}")]
        result = kvlab("run", QUICK, "--no-launch", *args, "--out", str(tmp_path), "-q")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"recompute @ 256: nothing answers {url}/health" in line


def test_run_help_documents_no_launch_per_capacity() -> None:
    text = kvlab("run", "--help").stdout
    for needle in ("--queries", "--no-launch", "MODE@CAPACITY=URL", "compose.yaml"):
        assert needle in text


def test_evaluate_with_other_tools_definitions(tmp_path) -> None:
    run = tmp_path / "x-run"
    run.mkdir()
    experiment("x", embedded("a")).write(run, "experiment.toml")
    with RecordStore(run / "records.jsonl") as store:
        for i, end in enumerate((500, 1500)):
            store.append(row(query_id=f"q{i}", t_end=end * MS, t_last_content=400 * MS))
    result = kvlab("evaluate", str(run), "--json", "--definitions", "vllm", "-d", "aiperf")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    block = data["definitions"]
    assert list(block["sets"]) == ["kvlab", "vllm", "aiperf"]
    cell = block["cells"][0]["definitions"]
    assert cell["kvlab"]["output_tokens_per_s"] == pytest.approx(64.0)  # 128 / 2.0 s
    assert cell["aiperf"]["e2e_ms"]["median"] == pytest.approx(400.0)  # last content
    report = (run / "report.md").read_text()
    assert "## The same run under other tools' definitions" in report
    assert "| mode | metric | kvlab | vllm | guidellm | aiperf |" in report
    bad = kvlab("evaluate", str(run), "--definitions", "genai-perf")
    assert bad.returncode == 2
    assert bad.stderr.strip() == ("error: unknown definition set 'genai-perf'; valid: kvlab, vllm, "
                                  "guidellm, aiperf, all")


def test_evaluate_names_reasoning_rows_and_a_flagged_server_histogram(tmp_path) -> None:
    from tests.analysis.test_reasoning import thinking
    from tests.analysis.test_server_histograms import FakeVllm

    run = tmp_path / "r-run"
    run.mkdir()
    experiment("r", embedded("a")).write(run, "experiment.toml")
    with RecordStore(run / "records.jsonl") as store:
        for i in (1, 2):
            store.append(thinking(f"q{i}").model_copy(update={"position": i, "load": "c=2"}))
    vllm = FakeVllm()
    start = vllm.reading("start", 1)
    vllm.observe(0.6, 0.7)  # vLLM's TTFTs, above the rows' 100 ms: the client is wrong
    end = vllm.reading("end", 3)
    (run / "gauges.jsonl").write_text(start.model_dump_json() + "\n"
                                      + end.model_dump_json() + "\n")
    result = kvlab("evaluate", str(run))
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "reasoning: 2 rows streamed reasoning first" in out
    assert "warning: a @ 512 c=2: the client's TTFT p50 100 ms is below vLLM's own" in out
    report = (run / "report.md").read_text()
    assert "## Reasoning streams" in report and "## Server histograms (/metrics)" in report
    data = json.loads((run / "evaluation.json").read_text())
    assert data["server_histograms"][0]["flags"]
    assert data["reasoning"][0]["rows"] == {"valid": 2, "measured": 2, "refused": {}, "flags": []}


def test_goodput_takes_vllm_and_aiperf_spellings() -> None:
    from typer.testing import CliRunner

    from kvlab.cli import app

    path = Path(__file__).parents[2] / "experiments" / "load-sweep.toml"
    shown = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--goodput",
                                     "ttft:200 inter_token_latency:40"])
    assert shown.exit_code == 0, shown.output
    assert "slo.ttft_ms = 200.0, slo.itl_ms = 40.0" in shown.stdout
    wrong = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--goodput", "ttfb:1"])
    assert wrong.exit_code != 0
