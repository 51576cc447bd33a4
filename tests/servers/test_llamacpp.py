"""The real llama-server with the bundled Gemma 3 270M: lifecycle, readiness, KV check.

Every test that launches llama-server is marked ``llamacpp`` and skipped (with the
reason) where the binary or the model is missing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from kvlab.errors import ServerLaunchError
from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer, wait_ready
from tests.conftest import llama_server_missing
from tests.ports import refusing_url

_REASON = llama_server_missing()
needs_llama = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")
SMALL = LlamaCppSettings(threads=2)


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """True once ``pid`` no longer runs (a zombie awaiting its reaper counts as gone)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_argv_without_starting() -> None:
    settings = LlamaCppSettings(n_gpu_layers="all", split_mode="layer", tensor_split=[1, 1],
                                binary=Path("/opt/llama/llama-server"),
                                model=Path("/models/qwen.gguf"), extra_args=["--no-mmap"])
    argv = LlamaServer(settings, 2048).argv()
    assert argv[:7] == ["/opt/llama/llama-server", "-m", "/models/qwen.gguf", "-c", "2048",
                        "-np", "1"]
    assert argv[argv.index("--no-mmap") - 1] == "--metrics"  # kvlab's flags, then extra
    joined = " ".join(argv)
    for part in ("-ngl all", "--split-mode layer", "--tensor-split 1,1", "-lv 4",
                 "-ctk f16 -ctv f16", "-fit off", "--metrics", "--port <free port>"):
        assert part in joined


def test_readiness_wait_sees_503_then_200(tmp_path: Path) -> None:
    # A real process that answers 503 ("Loading model") to the first three polls, then
    # 200: counted in polls, not seconds, so a slow first poll cannot skip the 503s.
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent("""
        import http.server, sys
        polls = []
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                polls.append(self.path)
                code = 503 if len(polls) <= 3 else 200
                self.send_response(code); self.end_headers(); self.wfile.write(b"{}")
            def log_message(self, *a): pass
        s = http.server.HTTPServer(("127.0.0.1", 0), H)
        print(s.server_address[1], flush=True)
        s.serve_forever()
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())  # type: ignore[union-attr]
        assert wait_ready(f"http://127.0.0.1:{port}", proc, timeout_s=30) == [503, 200]
    finally:
        proc.kill()
        proc.wait()


def test_readiness_gives_up_when_the_process_exits(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    with refusing_url() as url, pytest.raises(ServerLaunchError, match="exited with status 3"):
        wait_ready(url, proc, timeout_s=30)


@pytest.mark.llamacpp
@needs_llama
def test_start_facts_and_stop_leave_no_process(tmp_path: Path) -> None:
    server = LlamaServer(SMALL, 512, api_key="sekrit-test-key")
    server.start(tmp_path / "server.log")
    try:
        pid = server.pid
        assert pid is not None and server.running()
        assert httpx.get(f"{server.base_url}/health").status_code == 200
        assert httpx.get(f"{server.base_url}/props").status_code == 401  # key enforced
        facts = server.facts()
    finally:
        server.stop()
    assert _gone(pid)
    server.stop()  # twice is fine
    assert "sekrit-test-key" not in repr(facts) and "sekrit" not in " ".join(facts["argv"])
    assert facts["props"]["default_generation_settings"]["n_ctx"] == 512
    assert facts["model"]["sha256"] and facts["version"].startswith("version")
    assert facts["health_statuses_seen"][-1] == 200 and facts["startup_s"] > 0
    assert facts["kv_check"]["match"], facts["kv_check"]


@pytest.mark.llamacpp
@needs_llama
@pytest.mark.parametrize(("capacity", "cache_type"), [(512, "f16"), (4096, "f16"),
                                                      (512, "q8_0")])
def test_kv_prediction_equals_logged_allocation(tmp_path: Path, capacity: int,
                                                cache_type: str) -> None:
    settings = SMALL.model_copy(update={"cache_type_k": cache_type, "cache_type_v": cache_type})
    server = LlamaServer(settings, capacity)
    server.start(tmp_path / "server.log")
    try:
        check = server.kv_check()
    finally:
        server.stop()
    assert check is not None
    assert [c.kind for c in check.caches] == ["non-SWA", "SWA"]
    assert check.match, [c.mismatches for c in check.caches]
    assert check.caches[0].logged.cells == capacity  # type: ignore[union-attr]
    assert check.caches[0].logged.type_k == cache_type  # type: ignore[union-attr]


def test_capacity_is_per_slot_so_c_is_capacity_times_slots() -> None:
    argv = LlamaServer(SMALL.model_copy(update={"slots": 4}), 1000).argv()
    assert argv[argv.index("-c") + 1] == "4000" and argv[argv.index("-np") + 1] == "4"


@pytest.mark.llamacpp
@needs_llama
@pytest.mark.parametrize(("capacity", "slots"), [(512, 2), (700, 3)])
def test_every_slot_gets_the_capacity_and_the_kv_check_agrees(tmp_path: Path, capacity: int,
                                                               slots: int) -> None:
    """-c capacity × slots: llama-server's slot context (/props) is the capacity padded
    to 256, as with one slot, and the logged KV caches are kvlab's prediction."""
    server = LlamaServer(SMALL.model_copy(update={"slots": slots}), capacity)
    server.start(tmp_path / "server.log")
    try:
        props = server.props()
        metrics = httpx.get(server.base_url + "/metrics", timeout=10)
        check = server.kv_check()
    finally:
        server.stop()
    assert props is not None and props["total_slots"] == slots
    assert props["default_generation_settings"]["n_ctx"] == -(-capacity // 256) * 256
    assert check is not None and check.match, [c.mismatches for c in check.caches]
    assert check.inputs["n_ctx"] == capacity * slots
    full = check.caches[0].logged
    assert full is not None and (full.cells, full.n_stream) == (-(-capacity // 256) * 256,
                                                                slots)
    assert metrics.status_code == 200 and "llamacpp:prompt_tokens_total" in metrics.text


@pytest.mark.llamacpp
@needs_llama
def test_bad_argument_is_a_launch_error_with_the_log_tail(tmp_path: Path) -> None:
    server = LlamaServer(SMALL.model_copy(update={"extra_args": ["--no-such-flag"]}), 512)
    with pytest.raises(ServerLaunchError) as info:
        server.start(tmp_path / "server.log", ready_timeout_s=60)
    assert "exited with status" in str(info.value) and "no-such-flag" in str(info.value)
    assert not server.running()


_CHILD = """
import sys, time
from pathlib import Path
from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer
server = LlamaServer(LlamaCppSettings(threads=1), 512)
server.start(Path(sys.argv[1]))
print(server.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.llamacpp
@needs_llama
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killing_kvlab_kills_its_server(tmp_path: Path, sig: signal.Signals) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path / "s.log")],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.strip().isdigit(), "the child did not start its server"
        server_pid = int(line)
        assert not _gone(server_pid, within_s=0.2)
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        assert _gone(server_pid), f"llama-server {server_pid} outlived kvlab ({sig.name})"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.llamacpp
@needs_llama
def test_over_long_prompt_becomes_a_clear_failed_record(tmp_path: Path) -> None:
    import asyncio

    from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
    from kvlab.rundir import ApiKind, Outcome, RunClock

    server = LlamaServer(SMALL, 256)
    server.start(tmp_path / "server.log")
    try:
        endpoint = Endpoint(server.base_url, ApiKind.LLAMACPP_COMPLETION)
        spec = RequestSpec(prompt="word " * 600, max_tokens=8, stream=True,
                           params={"temperature": 0, "cache_prompt": False},
                           mode="t2", capacity=256, query_id="long")

        async def send():  # type: ignore[no-untyped-def]
            async with HarnessClient() as client:
                return await client.send(endpoint, spec, RunClock())

        record = asyncio.run(send())
    finally:
        server.stop()
    assert record.outcome == Outcome.HTTP_ERROR and record.http_status == 400
    assert record.error is not None and "exceeds the available context size" in record.error


@pytest.mark.llamacpp
@needs_llama
def test_full_measured_mode_passes_validation(tmp_path: Path) -> None:
    import json

    from kvlab.run.runner import RunOutput, RunRequest, run_experiment
    from tests.experiments import experiment, llamacpp

    exp = experiment("tiny-llamacpp", llamacpp("t2", threads=2), workload=dict(
        queries=2, capacities=[512], output_tokens=64, warmup=1)).write(tmp_path, "tiny.toml")
    result = run_experiment(RunRequest(exp), RunOutput(tmp_path / "runs"))
    summary = result.evaluation.summary("t2", 512)
    assert summary is not None and summary.queries == 2 and summary.refused == 0
    assert result.evaluation.counts["refused_rows"] == 0
    records = [json.loads(line) for line in
               (result.run_dir.path / "records.jsonl").read_text().splitlines()]
    measured = [r for r in records if not r["warmup"]]
    assert len(measured) == 2 and all(r["output_tokens"] == 64 for r in measured)
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    (entry,) = manifest["servers"]
    facts = entry["facts"]
    assert facts["kv_check"]["match"] and "-lv" in facts["argv"]
    assert facts["props"]["default_generation_settings"]["n_ctx"] == 512
    assert not LlamaServer(SMALL, 512).running() and _gone(facts["pid"])
