"""``kvlab vllm setup``: vLLM's environment, the converted model, and a smoke generation.

Like llama-server's smoke check (:mod:`kvlab.servers.smoke`), only a real generation
shows that vLLM works on this machine: the set-up starts it once on the bundled
Gemma 3 270M (``--enforce-eager``, which starts in about half the time and generates
the same tokens) and asks for a few forced tokens, or stops with one line.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from kvlab.errors import KvlabError, ServerLaunchError
from kvlab.servers.binary import cache_dir
from kvlab.servers.vllm import VllmServer, VllmSettings
from kvlab.servers.vllm_env import Progress, create_env, find_vllm
from kvlab.servers.vllm_model import convert_bundled

SMOKE_PROMPT = "The capital of France is"


@dataclass(frozen=True)
class VllmSetup:
    """What ``kvlab vllm setup`` made and measured (seconds are wall-clock)."""

    python: str
    version: str
    env_s: float  # creating (or finding) the environment
    model: str
    convert_s: float  # converting (or finding) the checkpoint
    smoke_tokens: int | None = None  # server-counted forced tokens (None: no smoke)
    smoke_startup_s: float | None = None  # launch until /health 200
    smoke_text: str | None = None
    smoke_log: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def smoke_log_path() -> Path:
    """Where the smoke check's vLLM log goes (kept for reading after a failure)."""
    return cache_dir() / "smoke" / "vllm.log"


def setup_vllm(python: Path | None = None, dtype: str = "bfloat16", smoke: bool = True,
               n_tokens: int = 8, progress: Progress = lambda _: None) -> VllmSetup:
    """Make kvlab's vLLM environment (or check the one ``python`` names), convert the
    bundled model for it, and, with ``smoke``, generate ``n_tokens`` forced tokens."""
    started = time.monotonic()
    env = find_vllm(python) if python is not None else create_env(progress=progress)
    env_s = time.monotonic() - started
    progress("converting the bundled Gemma 3 270M for vLLM (cached after the first time)")
    started = time.monotonic()
    model = convert_bundled(env, dtype)
    convert_s = time.monotonic() - started
    progress(f"checkpoint: {model.path} ({convert_s:.0f} s)")
    result = VllmSetup(str(env.python), env.version, round(env_s, 1), str(model.path),
                       round(convert_s, 1))
    if not smoke:
        return result
    progress("smoke check: starting vLLM once and generating "
             f"{n_tokens} tokens (about a minute)")
    settings = VllmSettings(python=env.python, dtype=dtype,  # type: ignore[arg-type]
                            enforce_eager=True, kv_cache_space_gib=1, threads=1)
    tokens, text, startup_s = smoke_generate(settings, n_tokens)
    return VllmSetup(**{**result.to_json(), "smoke_tokens": tokens,
                        "smoke_startup_s": round(startup_s, 1), "smoke_text": text,
                        "smoke_log": str(smoke_log_path())})


def smoke_generate(settings: VllmSettings, n_tokens: int = 8, capacity: int = 512
                   ) -> tuple[int, str, float]:
    """Start vLLM with ``settings``, ask for ``n_tokens`` forced tokens, stop it: the
    server-counted tokens, the text and the start-up time (s). ServerLaunchError in
    one line otherwise."""
    log = smoke_log_path()
    server = VllmServer(settings, capacity)
    try:
        server.start(log)
        body = {"model": settings.model_name(), "prompt": SMOKE_PROMPT,
                "max_tokens": n_tokens, "temperature": 0, "ignore_eos": True}
        answer = httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=120.0)
        answer.raise_for_status()
        data = answer.json()
        tokens = int(data["usage"]["completion_tokens"])
        text = str(data["choices"][0]["text"])
    except ServerLaunchError:
        raise
    except (KvlabError, httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        died = server.exit_description(wait_s=2.0)
        cause = f"vLLM {died}" if died else f"{type(exc).__name__}: {exc}"
        raise ServerLaunchError(f"vLLM smoke check failed: {cause}; log: {log}") from None
    finally:
        server.stop()
    if tokens != n_tokens:
        raise ServerLaunchError(f"vLLM smoke check: asked for {n_tokens} forced tokens, got "
                                f"{tokens}; log: {log}")
    return tokens, text, server.startup_s or 0.0
