"""End to end against the real embedded server: a run interrupted, then resumed."""

from __future__ import annotations

import json

import pytest

from kvlab.analysis.saturation import read_lag
from kvlab.errors import ConfigError, RunInterrupted
from kvlab.run.runner import (
    RunOutput,
    RunRequest,
    SilentReporter,
    evaluate_run,
    run_experiment,
)
from kvlab.rundir import read_records
from tests.experiments import (
    SMALL,
    Experiment,
    embedded,
    experiment,
    external,
    llamacpp,
    synthetic,
)
from tests.lateness import LatenessProbe
from tests.ports import refusing_url

TINY = experiment(
    "tiny", embedded("llama", "llamacpp-completion"),
    embedded("llama-nocache", "llamacpp-completion", no_cache=True),
    embedded("chat", "openai-chat"),
    workload=dict(queries=2, capacities=[128], output_tokens=8),
    compare=[("llama", "llama-nocache")])


class StopAfter(SilentReporter):
    """Simulates Ctrl-C after ``n`` measured records."""

    def __init__(self, n: int) -> None:
        self.n = n

    def advance(self, record) -> None:
        self.n -= 1
        if self.n == 0:
            raise KeyboardInterrupt


@pytest.mark.slow
def test_interrupted_run_resumes_without_duplicates(tmp_path) -> None:
    path = TINY.write(tmp_path)
    with pytest.raises(RunInterrupted) as info:
        run_experiment(RunRequest(path), RunOutput(tmp_path / "runs", reporter=StopAfter(3)))
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert f"resume with: kvlab run --resume {run_dir}" in str(info.value)
    assert info.value.exit_status == 130  # Ctrl-C: the shell's SIGINT convention
    kept = read_records(run_dir / "records.jsonl")
    assert sum(not r.warmup for r in kept) == 3

    result = run_experiment(RunRequest(resume=run_dir))
    records = read_records(run_dir / "records.jsonl")
    measured = [r.key for r in records if not r.warmup]
    assert len(measured) == len(set(measured)) == 6  # 3 modes x 2 queries, none twice
    assert sum(r.warmup for r in records) == 4  # one per server started (llama twice)

    # same prompts for every mode at the capacity (the chat mode adds its template)
    by_query = {}
    for r in records:
        if not r.warmup:
            by_query.setdefault(r.query_id, set()).add(r.prompt_sha256)
    assert all(len(shas) == 1 for shas in by_query.values())

    evaluation = result.evaluation
    assert evaluation.counts["refused_rows"] == 0, [str(v) for v in evaluation.violations]
    assert [c.status for c in evaluation.comparisons] == ["ok"]
    chat = evaluation.summary("chat", 128)
    assert chat is not None and chat.queries == 2 and chat.dist("ttft_ms")["mean"] > 0

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["experiment_file"] == TINY.text()
    assert len(manifest["invocations"]) == 2 and "cores" in manifest["host"]
    # the machine's load as each invocation started, and as the one that finished stopped
    assert all(len(s["load_average_started"]) == 3 for s in manifest["invocations"])
    assert len(manifest["invocations"][-1]["load_average_stopped"]) == 3
    assert all("--ctx-size" in s["facts"]["argv"] for s in manifest["servers"])
    assert (run_dir / "logs" / "chat-128.log").exists()
    prepared = json.loads((run_dir / "prepared.json").read_text())
    assert prepared["output_tokens"] == 8 and len(prepared["prompts"]["128"]) == 2

    report = (run_dir / "report.md").read_text()
    for section in ("## Protocol", "## Metric definitions", "## Validation",
                    "## Summaries", "## Comparisons", "## Manifest essentials",
                    "## Client load"):
        assert section in report
    assert "llama / llama-nocache" in report
    assert manifest["calibration"] is None  # none on this machine (tests/conftest.py)
    # Without a calibration the report says so, unless this run's own reads came late
    # (a loaded machine starves the client's loop): that evidence is reported first.
    lag = read_lag(records)
    if lag is not None and lag.typical > lag.gap:
        assert "client near saturation" in report
    else:
        assert "no calibrated limit for this machine" in report

    # each server's /metrics, read around its rows: the deltas are exactly the rows'
    # counts (warm-ups before the first reading; the interrupted block has no end reading
    # and its rerun is counted alone)
    counters = evaluation.server_counters
    assert [(c.mode, c.load, c.rows) for c in counters] == [
        ("llama", None, 2), ("llama-nocache", None, 1), ("chat", None, 2)]
    assert all(c.server == "embedded" and c.prompt.status == c.generation.status == "equal"
               for c in counters), [c.to_dict() for c in counters]
    assert all(p.status == "verified" for p in evaluation.prefix_reuse)
    assert "## Server counters (/metrics)" in report
    assert "verified, the server counted cached prompt tokens on all 2 rows" in report

    # evaluate is reproducible from records alone
    again = evaluate_run(run_dir)
    assert again.to_json() == json.loads((run_dir / "evaluation.json").read_text())


ATTACHED = experiment(
    "attached", embedded("a"), embedded("b", capacities=[128]),
    workload=dict(queries=2, capacities=[128, 160], output_tokens=8), compare=[("a", "b")])


@pytest.fixture(scope="module")
def user_servers():
    """Two servers started by "the user" (not by kvlab): contexts 128 and 160."""
    from contextlib import ExitStack

    from kvlab.serve import BackgroundServer, ServeSettings, create_app
    from tests.serve.conftest import wait_ready

    with ExitStack() as stack:
        urls = {}
        for n_ctx in (128, 160):
            server = stack.enter_context(BackgroundServer(create_app(
                ServeSettings(n_ctx=n_ctx, threads=1))))
            wait_ready(server.base_url)
            urls[n_ctx] = server.base_url
        yield urls


def test_no_launch_measures_the_users_servers_and_queries_override(tmp_path,
                                                                    user_servers) -> None:
    path = ATTACHED.write(tmp_path)
    url128, url160 = user_servers[128], user_servers[160]
    result = run_experiment(RunRequest(path, queries=1, no_launch=True, endpoints=(
        f"a={url128}", f"a@160={url160}", f"b@128={url128}")), RunOutput(tmp_path / "runs"))
    run_dir = result.run_dir.path
    records = read_records(run_dir / "records.jsonl")
    measured = sorted((r.mode, r.capacity, r.query_id) for r in records if not r.warmup)
    assert measured == [("a", 128, "q01"), ("a", 160, "q01"), ("b", 128, "q01")]

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["overrides"] == {"queries": 1}
    assert manifest["experiment_file"] == ATTACHED.text()  # the file, verbatim
    copy = (run_dir / "experiment.toml").read_text()
    assert "queries = 1  # set by kvlab run --queries 1" in copy
    assert manifest["no_launch"] == {"endpoints": {"a": url128, "a@160": url160,
                                                   "b@128": url128}}
    servers = {(s["mode"], s["capacity"]): s["facts"] for s in manifest["servers"]}
    assert servers[("a", 160)]["launched"] is False
    assert servers[("a", 160)]["base_url"] == url160
    assert servers[("a", 160)]["props"]["default_generation_settings"]["n_ctx"] == 160
    assert not (run_dir / "logs").exists()  # kvlab started no process
    assert [c.status for c in result.evaluation.comparisons] == ["ok"]
    report = (run_dir / "report.md").read_text()
    assert "not launched by kvlab" in report and "Overrides of this run (kvlab run): queries = 1" \
        in report and "Queries per (mode, capacity): 1 × 1" in report

    # a resume reads the run dir's experiment (1 query) and the recorded endpoints
    again = run_experiment(RunRequest(resume=run_dir))
    assert again.records_written == 0
    assert again.evaluation.summary("a", 160).queries == 1
    assert evaluate_run(run_dir).to_json() == again.evaluation.to_json()


def test_no_launch_refuses_a_server_of_another_capacity(tmp_path, user_servers) -> None:
    """MODE=URL for every capacity, but the server runs with 128: the 160 block stops
    the run with one line that says what to start, and the 128 rows are kept."""
    path = experiment("attached", embedded("a"), workload=dict(
        queries=2, capacities=[128, 160], output_tokens=8)).write(tmp_path)
    from kvlab.errors import EndpointUnreachable

    with pytest.raises(EndpointUnreachable) as info:
        run_experiment(RunRequest(path, queries=1, no_launch=True,
                                  endpoints=(f"a={user_servers[128]}",)),
                       RunOutput(tmp_path / "runs"))
    (run_dir,) = (tmp_path / "runs").iterdir()
    message = str(info.value)
    assert message.startswith("a @ 160: the server at ") and "context of 128 tokens" in message
    assert f"kvlab run --resume {run_dir}" in message and "\n" not in message
    kept = [r for r in read_records(run_dir / "records.jsonl") if not r.warmup]
    assert [(r.capacity, r.query_id) for r in kept] == [(128, "q01")]
    # the user starts the right server and resumes, naming it
    resumed = run_experiment(RunRequest(resume=run_dir, endpoints=(f"a@160={user_servers[160]}",),
                                        no_launch=True))
    assert resumed.records_written == 2  # warm-up + q01 at 160
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["no_launch"]["endpoints"]["a@160"] == user_servers[160]


def synthetic_two(url: str) -> Experiment:
    """Two queries at two capacities on the synthetic server (it has no /tokenize)."""
    return experiment("synthetic", synthetic(url, ttft_ms=2, itl_ms=1),
                      workload=dict(queries=2, capacities=[256, 512], output_tokens=4))


def test_an_endpoint_without_tokenize_is_measured_with_calibrated_prompts(tmp_path) -> None:
    """The synthetic server has no /tokenize: prompts are sized on its usage, and the
    method is in prepared.json, the manifest and the report."""
    from kvlab.bench.calibrate.check import synthetic_process
    from kvlab.rundir import Prepared

    with synthetic_process() as url:
        path = synthetic_two(url).write(tmp_path)
        result = run_experiment(RunRequest(path), RunOutput(tmp_path / "runs"))
    run = result.run_dir
    sizing = run.manifest()["prompt_sizing"]
    assert {c: s["method"] for c, s in sizing.items()} == {"256": "usage-calibration",
                                                           "512": "usage-calibration"}
    assert all(s["probes"] > 0 for s in sizing.values())
    prepared = Prepared.load(run.prepared_path)
    assert prepared.sizing[256].method == "usage-calibration"
    records = [r for r in read_records(run.records_path) if not r.warmup]
    assert len(records) == 4 and all(r.outcome == "ok" for r in records)
    planned = {(c, p.query_id): p.tokens for c, ps in prepared.prompts.items() for p in ps}
    for r in records:  # calibration counted exactly what the server then reported
        assert r.prompt_tokens == planned[(r.capacity, r.query_id)] <= r.capacity // 2
    report = run.report_path.read_text()
    assert "## Prompts" in report and "calibration on the server's usage" in report
    html = (run.path / "report.html").read_text()
    assert "<h2>Prompts</h2>" in html and "calibration on the server&#x27;s usage" in html


def external_one(url: str, model: str, **settings: str) -> Experiment:
    """One query to an external endpoint at ``url`` serving ``model``."""
    return experiment("ext", external("chat", url, model, **settings), workload=SMALL)


class NoUsageServer:
    """/v1/models lists model "m"; completions answer without usage; no /tokenize."""

    def __enter__(self) -> str:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: dict) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "m"}]})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/tokenize":
                    self._send(404, {"error": "no route"})
                else:
                    self._send(200, {"choices": [{"message": {"content": "x"}}]})

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()


@pytest.mark.parametrize("case", ["unreachable", "404", "key variable", "wrong model",
                                  "bad scheme", "401", "no way to size prompts"])
def test_a_run_refused_at_its_checks_leaves_no_run_directory(tmp_path, monkeypatch,
                                                             case: str) -> None:
    from contextlib import nullcontext

    from kvlab.errors import KvlabError
    from tests.fakeserver import FakeServer

    monkeypatch.delenv("KVLAB_TEST_NO_SUCH_KEY", raising=False)
    fake = FakeServer(api_key="k" if case == "401" else None, model="m")
    server = NoUsageServer() if case == "no way to size prompts" else \
        fake if case in ("404", "wrong model", "401", "key variable") else nullcontext()
    with server as started, refusing_url() as nowhere:
        expected = {"unreachable": f"cannot connect to {nowhere}/v1/models",
                    "404": "/nope/v1/models answered HTTP 404", "key variable":
                    "KVLAB_TEST_NO_SUCH_KEY is not set", "wrong model": "'other' is not served",
                    "bad scheme": "invalid URL", "401": "answered 401",
                    "no way to size prompts": "[workload] tokenizer"}[case]
        base = started if isinstance(started, str) else fake.base_url + "/v1"
        url = {"unreachable": nowhere + "/v1", "bad scheme": "htp:/127.0.0.1:9/v1",
               "404": fake.base_url + "/nope"}.get(case, base)
        extra = {"api_key_env": "KVLAB_TEST_NO_SUCH_KEY"} if case == "key variable" else {}
        path = external_one(url, "other" if case == "wrong model" else "m", **extra
                            ).write(tmp_path)
        with pytest.raises(KvlabError) as caught:
            run_experiment(RunRequest(path), RunOutput(tmp_path / "runs", html=False))
    assert expected in str(caught.value)
    runs = tmp_path / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_the_shipped_synthetic_endpoint_experiment_runs(tmp_path) -> None:
    """experiments/synthetic-endpoint.toml against the synthetic server (its port
    replaced), 2 queries: every row valid, TTFT and ITL near the server's schedule."""
    from pathlib import Path

    from kvlab.bench.calibrate.check import synthetic_process

    shipped = Path(__file__).parents[2] / "experiments" / "synthetic-endpoint.toml"
    path = tmp_path / "synthetic-endpoint.toml"
    with synthetic_process() as url, LatenessProbe() as probe:
        text = shipped.read_text().replace("http://127.0.0.1:8090", url)
        path.write_text(text.replace('body]\n', 'body]\nsynthetic = { ttft_ms = 20, '
                                     'itl_ms = 10 }\n'))
        result = run_experiment(RunRequest(path, queries=2),
                                RunOutput(tmp_path / "runs", html=False))
    evaluation = result.evaluation
    assert evaluation.counts["refused_rows"] == 0
    # TTFT: the server wakes for the request, then for its 20 ms deadline (two waits for
    # the CPU). ITL over 16 tokens: the first or the last token may come late by one
    # wait, which moves the mean of the 15 gaps by a 15th of it.
    itl_slack_ms = probe.lateness_ms(hops=1) / 15
    for capacity in (512, 2048):
        summary = evaluation.summary("synthetic-chat", capacity)
        assert summary is not None and summary.queries == 2
        assert 20 <= summary.dist("ttft_ms")["mean"] < probe.allow_ms(120.0, hops=2), probe
        itl = summary.mean("itl_effective_ms")
        assert itl is not None and 9 - itl_slack_ms < itl < 30 + itl_slack_ms, probe


def test_prepare_refused_at_its_checks_leaves_no_run_directory(tmp_path) -> None:
    from kvlab.errors import EndpointError
    from kvlab.run.runner import prepare_run

    with refusing_url() as nowhere:
        path = external_one(nowhere + "/v1", "m").write(tmp_path)
        with pytest.raises(EndpointError, match="cannot connect"):
            prepare_run(path, out=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_a_named_tokenizer_sizes_prompts_for_a_server_that_cannot_count(tmp_path) -> None:
    """No /tokenize and no usage: `kvlab run --tokenizer FILE` sizes the prompts, and the
    manifest, prepared.json and report say so."""
    from kvlab.rundir import Prepared
    from tests.bench.plan.test_sizing import _word_level_tokenizer

    tokenizer = _word_level_tokenizer(tmp_path / "tokenizer.json")
    with NoUsageServer() as url:
        path = external_one(url, "m").write(tmp_path)
        with pytest.raises(ConfigError, match="no such file"):
            run_experiment(RunRequest(path, tokenizer=tmp_path / "nope.json"),
                           RunOutput(tmp_path / "runs"))
        assert not (tmp_path / "runs").exists()
        result = run_experiment(RunRequest(path, tokenizer=tokenizer),
                                RunOutput(tmp_path / "runs", html=False))
    manifest = result.run_dir.manifest()
    assert manifest["overrides"] == {"tokenizer": str(tokenizer)}
    assert manifest["prompt_sizing"]["256"]["method"] == "tokenizer-file"
    prepared = Prepared.load(result.run_dir.prepared_path)
    assert all(p.tokens <= 128 for p in prepared.prompts[256])
    assert "the tokenizer file " + str(tokenizer) in result.run_dir.report_path.read_text()


LOADED = experiment(
    "loaded", embedded("slot", "openai-completion"), embedded("batch", "openai-chat", slots=2),
    workload=dict(queries=3, capacities=[128], output_tokens=8),
    load=dict(kind="concurrency", values=[1, 2]))


@pytest.mark.slow
def test_server_counters_per_load_point_equal_the_records(tmp_path) -> None:
    """kvlab serve, one slot and batching: each load point's Δ prompt and generated
    tokens from /metrics equal the sums the server reported request by request."""
    path = LOADED.write(tmp_path)
    result = run_experiment(RunRequest(path), RunOutput(tmp_path / "runs", html=True))
    counters = result.evaluation.server_counters
    assert [(c.mode, c.load) for c in counters] == [("slot", "c=1"), ("slot", "c=2"),
                                                    ("batch", "c=1"), ("batch", "c=2")]
    for c in counters:
        assert (c.server, c.rows) == ("embedded", 3)
        assert c.prompt.status == c.generation.status == "equal", c.to_dict()
        assert c.generation.delta == 3 * 8 and c.prompt.delta > 0
    # cache_prompt false: neither the slot nor batching's prefix cache reuses a token
    assert counters[0].deltas["prefix_cache_hits"] == 0
    assert counters[2].deltas["prefix_cache_hits"] == 0
    assert counters[2].deltas["prefix_cache_queries"] == 0  # not even looked up
    assert counters[2].deltas["preemptions"] == 0
    saved = json.loads((result.run_dir.path / "evaluation.json").read_text())
    assert saved["server_counters"][0]["prompt_check"]["status"] == "equal"
    html = (result.run_dir.path / "report.html").read_text()
    assert "Server counters (/metrics)" in html


def llama_counters(load: dict[str, object], api: str) -> Experiment:
    """llama-server with 2 slots of 256 tokens, two warm-ups, under ``load``."""
    return experiment("llama-counters", llamacpp("llama", api, threads=1, slots=2),
                      workload=dict(queries=2, capacities=[256], output_tokens=8, warmup=2),
                      load=load)


@pytest.mark.llamacpp
@pytest.mark.slow
@pytest.mark.parametrize(("load", "api"), [
    ({}, "llamacpp-completion"),
    ({"kind": "concurrency", "values": [2]}, "openai-chat")])
def test_llama_server_counters_equal_the_records(tmp_path, load: dict[str, object],
                                                 api: str) -> None:
    """The real llama-server, started with --metrics and 2 slots of 256 tokens each:
    Δ llamacpp:prompt_tokens_total over the measured rows equals Σ (prompt − cached)
    of the rows (the two warm-ups are before the first reading), sequential or loaded."""
    from tests.conftest import llama_server_missing

    reason = llama_server_missing()
    if reason:
        pytest.skip(reason)
    path = llama_counters(load, api).write(tmp_path)
    result = run_experiment(RunRequest(path), RunOutput(tmp_path / "runs"))
    (point,) = result.evaluation.server_counters
    assert (point.server, point.rows) == ("llamacpp", 2)
    assert point.prompt.status == point.generation.status == "equal", point.to_dict()
    assert point.generation.delta == 16 and point.deltas["prefix_cache_hits"] == 0
    (reuse,) = result.evaluation.prefix_reuse
    assert reuse.status == "verified" and reuse.reused == 0
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    facts = manifest["servers"][0]["facts"]
    assert facts["argv"][facts["argv"].index("-c") + 1] == "512"  # 256 per slot × 2
    assert facts["props"]["default_generation_settings"]["n_ctx"] == 256
    assert facts["kv_check"]["match"]


@pytest.mark.parametrize("details", [True, False])
def test_the_notebook_experiment_refuses_rows_answered_from_a_prefix_cache(
        tmp_path, monkeypatch, details: bool) -> None:
    """experiments/openai-endpoint.toml, as shipped, against an endpoint that reuses
    prefixes whatever cache_prompt says (vLLM's automatic prefix caching, faked: no
    vLLM in this test). With prompt-token details every measured row is refused and
    named; without them the report says the reuse is not verifiable."""
    from pathlib import Path

    from tests.fakeserver import FakeServer

    shipped = Path(__file__).resolve().parents[2] / "experiments" / "openai-endpoint.toml"
    monkeypatch.chdir(tmp_path)  # no .env of the developer's
    with FakeServer(api_key="sk-notebook", model="gemma") as server:
        server.prefix_cache, server.details = True, details
        monkeypatch.setenv("VLLM_BASE_URL", server.base_url + "/v1")
        monkeypatch.setenv("VLLM_MODEL_ID", "gemma")
        monkeypatch.setenv("VLLM_API_KEY", "sk-notebook")
        result = run_experiment(RunRequest(shipped), RunOutput(tmp_path / "runs"))
    evaluation = result.evaluation
    (reuse,) = evaluation.prefix_reuse
    report = result.run_dir.report_path.read_text()
    refused = [v for v in evaluation.violations if v.reason == "prefix_reuse"]
    if details:
        assert evaluation.counts["measured"] == 9 and len(refused) == 9
        assert evaluation.counts["refused_rows"] == 9
        assert all(s.queries == 0 for s in evaluation.summaries)  # nothing aggregated
        assert reuse.status == "verified" and reuse.reused == 9
        assert "from its prefix cache under cache_prompt = false" in report
    else:
        assert refused == [] and reuse.status == "prefix reuse not verifiable"
        assert "vllm: prefix reuse not verifiable on 9 of 9 rows" in report
    assert "sk-notebook" not in "".join(p.read_text() for p in result.run_dir.path.rglob("*")
                                        if p.is_file())


def test_an_external_endpoints_metrics_are_read_with_its_key(tmp_path, monkeypatch) -> None:
    """kvlab serve as an external endpoint behind an API key: its /metrics is read with
    the key (in the header only), the counters are checked, the key is in no file."""
    from kvlab.serve import BackgroundServer, ServeSettings, create_app
    from tests.serve.conftest import wait_ready

    key = "sk-external-metrics-42"
    monkeypatch.setenv("KVLAB_TEST_KEY", key)
    settings = ServeSettings(n_ctx=256, threads=1, api_key=key)
    with BackgroundServer(create_app(settings)) as server:
        wait_ready(server.base_url)
        path = external_one(server.base_url + "/v1", "toy", api_key_env="KVLAB_TEST_KEY"
                            ).write(tmp_path)
        result = run_experiment(RunRequest(path), RunOutput(tmp_path / "runs"))
    (point,) = result.evaluation.server_counters
    assert (point.server, point.mode, point.rows) == ("embedded", "chat", 1)
    assert point.prompt.status == point.generation.status == "equal"
    assert (result.run_dir.path / "gauges.jsonl").is_file()
    for file in result.run_dir.path.rglob("*"):
        if file.is_file():
            assert key not in file.read_text(errors="replace"), file
