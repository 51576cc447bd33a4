"""The vLLM server kind without starting vLLM: settings, argv, environment, bad input.

The real vLLM is started in tests/servers/test_vllm_live.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from kvlab.errors import ConfigError, ExperimentError, ModelFileError
from kvlab.experiment import Experiment
from kvlab.servers.chat_template import CHATML_WITH_BOS, LLAMACPP_CHATML
from kvlab.servers.kinds import SERVER_KINDS
from kvlab.servers.vllm import VllmServer, VllmSettings, descendants, start_ticks
from kvlab.servers.vllm_env import find_vllm, write_dist_alias
from kvlab.servers.vllm_model import check_hf_dir, hash_files


def test_vllm_is_a_registered_kind_that_an_experiment_file_names() -> None:
    assert SERVER_KINDS["vllm"] is VllmSettings
    experiment = Experiment.model_validate({
        "name": "v", "modes": [{"name": "vllm", "server": "vllm", "api": "openai-chat",
                                "vllm": {"max_num_seqs": 8, "threads": 1}}]})
    settings = experiment.modes[0].settings
    assert isinstance(settings, VllmSettings)
    assert settings.max_num_seqs == 8 and settings.omp_bind() == "0"


def test_argv_keeps_prefix_caching_off_and_asks_for_cached_token_counts() -> None:
    server = VllmSettings().build(capacity=2048)
    argv = server.argv()
    assert argv[argv.index("--max-model-len") + 1] == "2048"  # the capacity
    assert "--no-enable-prefix-caching" in argv
    assert "--enable-prefix-caching" not in argv
    assert "--enable-prompt-tokens-details" in argv
    assert argv[argv.index("--served-model-name") + 1] == "gemma-3-270m"
    assert argv[argv.index("--dtype") + 1] == "bfloat16"
    assert "--enforce-eager" not in argv


def test_every_setting_reaches_the_command_line_or_the_environment(tmp_path: Path) -> None:
    settings = VllmSettings(
        model=tmp_path, served_model_name="m", dtype="float32", max_model_len=4096,
        max_num_seqs=16, kv_cache_space_gib=2, kv_cache_bytes=31064064, threads=2,
        prefix_caching=True,
        enforce_eager=True, chat_template=tmp_path / "t.jinja", extra_args=["--seed", "7"])
    server = settings.build(capacity=1024)
    argv = server.argv()
    assert argv[argv.index("--max-model-len") + 1] == "4096"
    assert argv[argv.index("--max-num-seqs") + 1] == "16"
    assert argv[argv.index("--dtype") + 1] == "float32"
    assert argv[argv.index("--served-model-name") + 1] == "m"
    assert argv[argv.index("--chat-template") + 1] == str(tmp_path / "t.jinja")
    assert "--enable-prefix-caching" in argv and "--enforce-eager" in argv
    assert argv[argv.index("--seed") + 1] == "7"
    env = server.env_overrides()
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == "31064064"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    assert env["HF_HUB_OFFLINE"] == "1"  # weights come from local files only
    assert VllmSettings(cpu_bind="auto").omp_bind() == "auto"
    assert "VLLM_CPU_OMP_THREADS_BIND" not in VllmSettings().build(512).env_overrides()


def test_a_fraction_of_a_gib_is_refused_in_one_line() -> None:
    """vLLM-CPU reads VLLM_CPU_KVCACHE_SPACE with int(): 0.5 would stop it at start-up
    with "invalid literal for int()", so the setting refuses it and names the way to a
    small budget."""
    with pytest.raises(ValueError, match="whole GiB; for a smaller budget give kv_cache_bytes"):
        VllmSettings(kv_cache_space_gib=0.5)
    assert VllmSettings(kv_cache_space_gib=2.0).kv_cache_space_gib == 2


def test_a_max_model_len_below_the_capacity_is_refused_before_launch() -> None:
    with pytest.raises(ConfigError, match="max_model_len: 1024 is below the capacity 2048"):
        VllmSettings(max_model_len=1024).build(capacity=2048)


def test_an_experiment_whose_max_model_len_is_below_a_capacity_is_one_line(
        tmp_path: Path) -> None:
    from kvlab.experiment import load_experiment
    from tests.experiments import experiment, vllm

    path = experiment("x", vllm("v", "openai-chat", max_model_len=1024),
                      workload=dict(capacities=[512, 2048])).write(tmp_path)
    with pytest.raises(ExperimentError) as refused:
        load_experiment(path)
    line = str(refused.value)
    assert "\n" not in line and str(path) in line
    assert "modes[0].vllm.max_model_len: 1024 is below the capacity 2048" in line


def test_threads_and_cpu_bind_together_are_refused() -> None:
    with pytest.raises(ValidationError, match="threads or cpu_bind"):
        VllmSettings(threads=1, cpu_bind="0")


def test_an_hf_folder_without_config_or_tokenizer_is_named(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="is not a folder"):
        check_hf_dir(tmp_path / "missing")
    with pytest.raises(ModelFileError, match=r"has no config\.json"):
        check_hf_dir(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelFileError, match=r"has no tokenizer \(tokenizer\.json or "):
        check_hf_dir(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{}")
    found = check_hf_dir(tmp_path)
    assert set(found.files) == {"config.json", "tokenizer.json"}
    assert found.files == hash_files(tmp_path)
    assert found.chat_template is None


def test_a_missing_vllm_says_how_to_install_it(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVLAB_VLLM_PYTHON", raising=False)
    with pytest.raises(ConfigError, match=r"vllm\.python .* does not exist; install it with "
                                          r"`kvlab vllm setup`"):
        find_vllm(tmp_path / "bin" / "python")
    # a Python without vLLM: this test's own
    with pytest.raises(ConfigError, match="cannot import vLLM"):
        find_vllm(Path(sys.executable))
    monkeypatch.setenv("KVLAB_VLLM_PYTHON", str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=r"\$KVLAB_VLLM_PYTHON"):
        find_vllm()


def test_the_dist_alias_lets_importlib_find_vllm(tmp_path: Path) -> None:
    write_dist_alias(tmp_path, "0.32.0")
    probe = "import importlib.metadata as m; print(m.version('vllm'))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)}, check=True)
    assert out.stdout.strip() == "0.32.0+cpu"  # "cpu" kept: vLLM's platform check reads it


def test_the_chat_template_prints_bos_then_llamacpp_chatml() -> None:
    from transformers.utils.chat_template_utils import render_jinja_template

    messages = [{"role": "user", "content": "Hi"}]
    rendered = [render_jinja_template(conversations=[messages], chat_template=template,
                                      add_generation_prompt=True, bos_token="<bos>")[0][0]
                for template in (CHATML_WITH_BOS, LLAMACPP_CHATML)]
    assert rendered[0] == "<bos>" + rendered[1]
    assert rendered[1] == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_descendants_and_start_times_come_from_proc() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in descendants(os.getpid())
        assert start_ticks(child.pid) is not None
    finally:
        child.kill()
        child.wait()
    assert start_ticks(child.pid) is None


def test_dry_run_argv_shows_placeholders_until_resolved() -> None:
    server = VllmServer(VllmSettings(), capacity=512)
    argv = server.argv()
    assert argv[1:4] == ["-m", "vllm.entrypoints.cli.main", "serve"]
    assert argv[0].endswith("bin/python")  # the environment it would use, unchecked
    assert "<converted Gemma>" in argv and argv[-1] == "<free port>"
