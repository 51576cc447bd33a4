"""The shipped llama.cpp / endpoint experiment files validate with the harness loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.experiment import Mode, load_experiment
from kvlab.run.planner import mode_plan
from kvlab.servers.embedded import EmbeddedSettings
from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _llamacpp(mode: Mode) -> LlamaCppSettings:
    assert isinstance(mode.settings, LlamaCppSettings), mode.server
    return mode.settings


def _embedded(mode: Mode) -> EmbeddedSettings:
    assert isinstance(mode.settings, EmbeddedSettings), mode.server
    return mode.settings


def test_cpu_experiment_is_t1_vs_t2_at_three_capacities() -> None:
    exp = load_experiment(EXPERIMENTS / "llamacpp-cpu.toml")
    assert [m.name for m in exp.modes] == ["t1", "t2"] and exp.compare == [("t1", "t2")]
    assert exp.workload.capacities == [512, 2048, 4096] and exp.workload.queries == 30
    assert exp.workload.output_tokens == 64 and exp.workload.warmup == 1
    assert [_llamacpp(m).threads for m in exp.modes] == [1, 2]


def test_gpu_experiment_argv_has_the_tutorial_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVLAB_GGUF", "/models/qwen-q8_0.gguf")
    exp = load_experiment(EXPERIMENTS / "llamacpp-gpu-mono-vs-dual.toml")
    mono, dual = (_llamacpp(m) for m in exp.modes)
    assert (mono.gpus, dual.gpus) == (1, 2)
    mono_argv = " ".join(LlamaServer(mono, 4096).argv())
    dual_argv = " ".join(LlamaServer(dual, 4096).argv())
    assert "-m /models/qwen-q8_0.gguf -c 4096 -np 1" in mono_argv
    assert "--split-mode none" in mono_argv and "-ngl all" in mono_argv
    assert "--split-mode layer --tensor-split 1,1" in dual_argv


def test_openai_endpoint_experiment() -> None:
    exp = load_experiment(EXPERIMENTS / "openai-endpoint.toml")
    (mode,) = exp.modes
    assert mode.server == "external" and mode.stream and exp.workload.output_tokens == 32
    params = mode_plan(exp, mode).request_params()
    assert params["chat_template_kwargs"] == {"enable_thinking": False}


def test_compose_has_six_gpu_profiles_and_two_cpu_profiles() -> None:
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load((EXPERIMENTS / "compose.yaml").read_text())
    services = doc["services"]
    gpu = sorted(f"{m}-{c}" for m in ("mono", "dual") for c in (512, 2048, 4096))
    assert sorted(services) == sorted([*gpu, "cpu-512", "cpu-2048"])
    for name in gpu:
        svc = services[name]
        devices = svc["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"]
        assert len(devices) == (1 if name.startswith("mono") else 2)
        assert svc["image"] == "ghcr.io/ggml-org/llama.cpp:server-cuda"
        assert f"-c {name.split('-')[1]}" in svc["command"]
    for name in ("cpu-512", "cpu-2048"):
        svc = services[name]
        assert "deploy" not in svc and svc["profiles"] == [name]
        assert svc["image"] == "${KVLAB_LLAMA_IMAGE:-kvlab/llama-server-cpu:local}"
        assert svc["command"].endswith(f"-c {name.split('-')[1]}")
    # the CPU experiment's capacities are the CPU profiles'
    exp = load_experiment(EXPERIMENTS / "llamacpp-compose-cpu.toml")
    assert [f"cpu-{c}" for c in exp.workload.capacities] == ["cpu-512", "cpu-2048"]


def test_dry_run_prints_every_argv_and_starts_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kvlab.run.planner import RunRequest, plan_new
    from kvlab.run.runplan import Launch, WarmUp

    monkeypatch.setenv("KVLAB_GGUF", "/models/qwen-q8_0.gguf")
    plan, _ = plan_new(RunRequest(EXPERIMENTS / "llamacpp-gpu-mono-vs-dual.toml"))
    launches = [s for s in plan.steps if isinstance(s, Launch)]
    assert [(s.mode, s.capacity) for s in launches] == [
        (m, c) for m in ("mono", "dual") for c in (512, 2048, 4096)]
    argvs = [plan.target(s)["argv"] for s in launches]
    assert all("--port" in a and "<free port>" in a for a in argvs)
    warm = sum(s.requests for s in plan.steps if isinstance(s, WarmUp) and s.mode == "mono"
               and s.capacity == 512)
    assert warm + plan.workload.rows == 31

def test_gemma_experiment_compares_the_engine_and_llama_server_at_equal_settings() -> None:
    from kvlab.servers.embedded import EmbeddedServer

    exp = load_experiment(EXPERIMENTS / "gemma-embedded-vs-llamacpp.toml")
    recompute, cached, llama = exp.modes
    assert exp.compare == [("recompute", "kv-cache"), ("kv-cache", "llama-server")]
    engine, kv_cache = _embedded(recompute), _embedded(cached)  # one model, no cache / cache
    assert engine.model == kv_cache.model == "gemma-3-270m"
    assert (engine.no_cache, kv_cache.no_cache) == (True, False)
    settings = _llamacpp(llama)
    assert settings.model is None  # the bundled GGUF, the file the engine loads
    assert engine.threads == kv_cache.threads == settings.threads
    for capacity in exp.all_capacities():  # equal capacity: -c and --ctx-size
        argv = EmbeddedServer(capacity, model="gemma-3-270m", no_cache=True).argv()
        assert argv[argv.index("--model") + 1] == "gemma-3-270m"
        assert argv[argv.index("--ctx-size") + 1] == str(capacity)
        assert "--preset" not in argv
        llama_argv = LlamaServer(settings, capacity).argv()
        assert llama_argv[llama_argv.index("-c") + 1] == str(capacity)


def test_continuous_batching_is_one_slot_vs_batching_on_the_same_model() -> None:
    exp = load_experiment(EXPERIMENTS / "continuous-batching.toml")
    one, batched = exp.modes
    assert exp.compare == [("one-slot", "batching")]
    assert [v for v in exp.load.values] == [1, 2, 4, 8, 16]
    assert _embedded(one).model == _embedded(batched).model == "gemma-3-270m"
    assert _embedded(one).threads == _embedded(batched).threads
    one_argv = one.settings.build(256).argv()
    batched_argv = batched.settings.build(256).argv()
    assert "--slots" not in one_argv and "--kv-blocks" not in one_argv
    assert batched_argv[batched_argv.index("--slots") + 1] == "16"
    assert batched_argv[batched_argv.index("--kv-blocks") + 1] == "256"
