"""The four clients of the cross-check, each as its users run it: a command line.

Every client gets the same job (:class:`Job`): the synthetic server's URL, the same
prompts, the same forced output length, one request at a time, no warm-up, and a
folder of its own. All four speak OpenAI's completions API, whose stream opens with the
first token: over chat, the server's first event is an empty role chunk, which vLLM's
definition times as the first token (:mod:`kvlab.analysis.definitions`), so its TTFT
would measure that definition rather than its clock. Each one's result file is the one
its users keep (kvlab's run directory, GuideLLM's ``benchmarks.json``, AIPerf's
``profile_export.jsonl``, vLLM's ``--save-detailed`` JSON), read back by
:func:`kvlab.store.runs.load_run_or_import`.
A peer's own summary (:meth:`Client.reported`) is the figures it prints: how many
requests it completed and its median TTFT, which its file read back must give again.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from kvlab.crosscheck.envs import find_peer
from kvlab.errors import ConfigError
from kvlab.servers.vllm_env import find_vllm

MODEL = "synthetic"  # the model id the synthetic server lists
# What every client's requests carry besides the prompt: the server forces the length.
BODY = {"ignore_eos": True, "temperature": 0}


@dataclass(frozen=True)
class Job:
    """One client's share of one round: ``tokens`` forced output tokens for each of
    ``prompts``, sent one after another to ``url`` (no /v1), files under ``out``."""

    url: str
    prompts: tuple[str, ...]
    tokens: int
    out: Path
    tokenizer: Path  # a Hugging Face tokenizer folder (AIPerf and vLLM need one)


@dataclass(frozen=True)
class Reported:
    """What a client printed about its own run: completed requests, median TTFT (ms)."""

    requests: int
    median_ttft_ms: float


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


class Client:
    """A client: the command that measures a job, and where its result lands."""

    name: ClassVar[str]
    program: ClassVar[str]  # how the tool is named for users (version added by run)

    def version(self) -> str:
        raise NotImplementedError

    def command(self, job: Job) -> list[str]:
        """The command line (files it reads are written under ``job.out`` first)."""
        raise NotImplementedError

    def result(self, job: Job) -> Path:
        """The result file (or run directory) the command left."""
        raise NotImplementedError

    def reported(self, job: Job) -> Reported | None:
        """The tool's own summary of the job (None: kvlab, which is what reads it)."""
        return None

    def environment(self) -> dict[str, str]:
        """The environment its command runs with (kvlab's own, unless said)."""
        return dict(os.environ)


class KvlabClient(Client):
    """``kvlab run`` on an experiment naming the synthetic server as an endpoint."""

    name = "kvlab"
    program = "kvlab run"

    def version(self) -> str:
        from kvlab import __version__

        return __version__

    def command(self, job: Job) -> list[str]:
        _jsonl(job.out / "prompts.jsonl",
               [{"id": f"r{i:03d}", "prompt": p} for i, p in enumerate(job.prompts)])
        (job.out / "crosscheck.toml").write_text(
            'name = "crosscheck"\n'
            "[workload]\ncapacities = [1024]\n"
            f"output_tokens = {job.tokens}\nwarmup = 0\n"
            '[workload.dataset]\nkind = "jsonl"\npath = "prompts.jsonl"\n'
            '[protocol]\ntemperature = 0.0\nignore_eos = true\n'
            '[[modes]]\nname = "kvlab"\nserver = "external"\napi = "openai-completion"\n'
            "stream = true\n[modes.external]\n"
            f'base_url = "{job.url}/v1"\nmodel = "{MODEL}"\n'
            "[modes.body]\nstream_options = { include_usage = true }\n", encoding="utf-8")
        return [sys.executable, "-m", "kvlab", "run", str(job.out / "crosscheck.toml"),
                "--out", str(job.out / "runs"), "--quiet", "--no-history",
                "--tokenizer", str(job.tokenizer / "tokenizer.json")]

    def result(self, job: Job) -> Path:
        """The newest run directory (an earlier cross-check into the same folder left
        its own beside it)."""
        runs = [p for p in (job.out / "runs").iterdir() if p.is_dir()] \
            if (job.out / "runs").is_dir() else []
        if not runs:
            raise ConfigError(f"{job.out / 'runs'}: kvlab run left no run directory")
        return max(runs, key=lambda p: p.stat().st_mtime_ns)


class GuideLLMClient(Client):
    """``guidellm run`` with a scenario: synchronous, the prompts once each."""

    name = "guidellm"
    program = "GuideLLM"

    def version(self) -> str:
        return find_peer("guidellm").version

    def command(self, job: Job) -> list[str]:
        data = _jsonl(job.out / "prompts.jsonl", [{"prompt": p} for p in job.prompts])
        scenario = {"spec": {
            "backend": {"kind": "openai_http", "target": job.url, "model": MODEL,
                        "request_format": "/v1/completions", "max_tokens": job.tokens,
                        "extras": {"body": BODY}},
            "profile": {"kind": "synchronous"},
            "data": [{"kind": "json_file", "path": str(data)}],
            "constraints": [{"kind": "max_requests", "count": len(job.prompts)}],
            "outputs": [{"kind": "json", "path": str(job.out / "benchmarks.json")}],
        }}
        (job.out / "scenario.json").write_text(json.dumps(scenario), encoding="utf-8")
        return [str(find_peer("guidellm").executable), "run", "--scenario",
                str(job.out / "scenario.json"), "--disable-console-interactive"]

    def result(self, job: Job) -> Path:
        return job.out / "benchmarks.json"

    def reported(self, job: Job) -> Reported:
        metrics = json.loads(self.result(job).read_text())["benchmarks"][0]["metrics"]
        return Reported(int(metrics["request_totals"]["successful"]),
                        float(metrics["time_to_first_token_ms"]["successful"]["median"]))


class AIPerfClient(Client):
    """``aiperf profile`` on the prompts as a single-turn file, concurrency 1, with the
    server's token counts (``--use-server-token-count``) as kvlab's are."""

    name = "aiperf"
    program = "AIPerf"

    def version(self) -> str:
        return find_peer("aiperf").version

    def command(self, job: Job) -> list[str]:
        data = _jsonl(job.out / "prompts.jsonl", [{"text": p} for p in job.prompts])
        # --osl: AIPerf asks the length itself (max_tokens: --use-legacy-max-tokens) and
        # writes it in its file (requested_osl), so the file says what was asked
        extras = [a for k, v in BODY.items()
                  for a in ("--extra-inputs", f"{k}:{json.dumps(v)}")]
        extras += ["--osl", str(job.tokens), "--osl-stddev", "0", "--use-legacy-max-tokens"]
        return [str(find_peer("aiperf").executable), "profile", "--model", MODEL,
                "--tokenizer", str(job.tokenizer), "--url", job.url,
                "--endpoint-type", "completions", "--streaming", "--input-file", str(data),
                "--custom-dataset-type", "single_turn", "--use-server-token-count",
                "--request-count", str(len(job.prompts)), "--concurrency", "1",
                "--artifact-dir", str(job.out), "--ui-type", "none", "--no-auto-plot",
                *extras]

    def result(self, job: Job) -> Path:
        return job.out / "profile_export.jsonl"

    def environment(self) -> dict[str, str]:
        """Without Hugging Face's offline switches: with HF_HUB_OFFLINE set, AIPerf 0.13
        takes every tokenizer name for a Hub repository id and refuses a local folder
        (HFValidationError); the folder it is given is local, so nothing is fetched."""
        return {k: v for k, v in os.environ.items()
                if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}

    def reported(self, job: Job) -> Reported:
        summary = json.loads((job.out / "profile_export_aiperf.json").read_text())
        return Reported(int(summary["request_count"]["avg"]),
                        float(summary["time_to_first_token"]["p50"]))


class VllmBenchClient(Client):
    """``vllm bench serve`` from kvlab's vLLM environment: its random dataset of as many
    prompts, concurrency 1, saving every request (``--save-detailed``)."""

    name = "vllm-bench"
    program = "vllm bench serve"

    def version(self) -> str:
        return find_vllm().version

    def command(self, job: Job) -> list[str]:
        # vLLM's custom (JSONL) dataset needs pandas, which vLLM's server environment
        # does not have: its random dataset needs nothing more, and the synthetic
        # server's schedule does not depend on the prompt
        return [str(find_vllm().python), "-m", "vllm.entrypoints.cli.main", "bench", "serve",
                "--backend", "openai", "--base-url", job.url,
                "--endpoint", "/v1/completions", "--model", MODEL,
                "--tokenizer", str(job.tokenizer), "--dataset-name", "random",
                "--random-input-len", "32", "--random-output-len", str(job.tokens),
                "--random-range-ratio", "0", "--seed", "42",
                "--num-prompts", str(len(job.prompts)),
                "--max-concurrency", "1", "--request-rate", "inf", "--ignore-eos",
                "--temperature", "0", "--disable-tqdm", "--save-result", "--save-detailed",
                "--result-dir", str(job.out), "--result-filename", "vllm-bench.json",
                "--metadata", f"output_len={job.tokens}"]

    def result(self, job: Job) -> Path:
        return job.out / "vllm-bench.json"

    def reported(self, job: Job) -> Reported:
        data = json.loads(self.result(job).read_text())
        return Reported(int(data["completed"]), float(data["median_ttft_ms"]))


CLIENTS: dict[str, Client] = {c.name: c for c in
                              (KvlabClient(), GuideLLMClient(), AIPerfClient(),
                               VllmBenchClient())}
