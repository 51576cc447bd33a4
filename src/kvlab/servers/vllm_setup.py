"""``kvlab vllm setup``: vLLM's environment, the converted model, and a smoke generation.

Like llama-server's smoke check (:mod:`kvlab.servers.smoke`), only a real generation
shows that vLLM works on this machine: the set-up starts it once on the bundled
Gemma 3 270M (``--enforce-eager``, which starts in about half the time and generates
the same tokens) and asks for a few forced tokens, or stops with one line. A passed
check is noted (:func:`smoke_note_path`) with what it ran: the environment, vLLM's
version and the checkpoint's files; a later set-up of the same three need not start
vLLM again (``smoke=None``), as ``make run`` asks, while ``make test`` always checks.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from kvlab.errors import KvlabError, ServerLaunchError
from kvlab.servers.binary import cache_dir
from kvlab.servers.vllm import VllmServer, VllmSettings
from kvlab.servers.vllm_env import Progress, VllmEnv, create_env, find_vllm
from kvlab.servers.vllm_model import ModelDir, convert_bundled

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
    # when the smoke check ran: now, or earlier on the same environment and model (then
    # not run again, and the figures above are that check's)
    smoke_checked_at: str | None = None
    smoke_reused: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def smoke_log_path() -> Path:
    """Where the smoke check's vLLM log goes (kept for reading after a failure)."""
    return cache_dir() / "smoke" / "vllm.log"


def smoke_note_path() -> Path:
    """Where a passed smoke check is noted (with what it ran on)."""
    return cache_dir() / "smoke" / "vllm-passed.json"


def _smoke_key(env: VllmEnv, model: ModelDir) -> dict[str, str]:
    """What a smoke check ran on: the environment (its python and its pyvenv.cfg, which
    a new environment rewrites), vLLM's version and the checkpoint's files."""
    cfg = env.python.parent.parent / "pyvenv.cfg"
    made = str(cfg.stat().st_mtime_ns) if cfg.is_file() else "no pyvenv.cfg"
    files = hashlib.sha256(json.dumps(model.files, sort_keys=True).encode()).hexdigest()
    return {"python": str(env.python), "environment_made": made, "version": env.version,
            "model": str(model.path), "model_files_sha256": files}


def passed_smoke(env: VllmEnv, model: ModelDir) -> dict[str, Any] | None:
    """What the smoke check that passed on this environment and model found (the
    ``smoke_*`` fields of VllmSetup), or None if none did."""
    try:
        note = json.loads(smoke_note_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict) or note.get("key") != _smoke_key(env, model):
        return None
    return dict(note["smoke"])


def note_smoke(env: VllmEnv, model: ModelDir, facts: dict[str, Any]) -> None:
    """Note that the smoke check passed on ``env`` and ``model`` with ``facts`` (the
    ``smoke_*`` fields of VllmSetup)."""
    path = smoke_note_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": _smoke_key(env, model), "smoke": facts}, indent=1),
                    encoding="utf-8")


def setup_vllm(python: Path | None = None, dtype: str = "bfloat16", smoke: bool | None = True,
               n_tokens: int = 8, progress: Progress = lambda _: None) -> VllmSetup:
    """Make kvlab's vLLM environment (or check the one ``python`` names), convert the
    bundled model for it, and generate ``n_tokens`` forced tokens: with ``smoke``
    True always, with None unless a check passed on this environment and model
    (noted), with False never."""
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
    if smoke is False:
        return result
    note = passed_smoke(env, model) if smoke is None else None
    if note is not None:
        return VllmSetup(**{**result.to_json(), **note, "smoke_reused": True})
    progress("smoke check: starting vLLM once and generating "
             f"{n_tokens} tokens (about a minute)")
    settings = VllmSettings(python=env.python, dtype=dtype,  # type: ignore[arg-type]
                            enforce_eager=True, kv_cache_space_gib=1, threads=1)
    tokens, text, startup_s = smoke_generate(settings, n_tokens)
    smoke_facts = {"smoke_tokens": tokens, "smoke_startup_s": round(startup_s, 1),
                   "smoke_text": text, "smoke_log": str(smoke_log_path()),
                   "smoke_checked_at": datetime.now().astimezone().isoformat(timespec="seconds")}
    note_smoke(env, model, smoke_facts)
    return VllmSetup(**{**result.to_json(), **smoke_facts})


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
