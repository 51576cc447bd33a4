"""Can this llama-server generate a token here? Start it once on a small model and ask.

A build for the wrong CPU loads and answers ``/health`` while model loading is still to
come, then dies at its first matrix product (the warm-up, or the first request). Only a
real generation tells. ``make run``, ``make test`` and ``kvlab preflight`` run this
before anything else, so a broken build stops the set-up with one line instead of
failing every test that needs the server.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from kvlab.errors import KvlabError, ServerLaunchError
from kvlab.servers.binary import cache_dir
from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer

SMOKE_PROMPT = "The capital of France is"
REBUILD_HINT = ("rebuild it for this machine with `python -m kvlab.servers.build` "
                "(`make` does this; portable unless KVLAB_LLAMA_CPU=native), or set "
                "LLAMA_SERVER to a llama-server built for this CPU")


@dataclass(frozen=True)
class SmokeResult:
    """One successful smoke generation."""

    binary: str
    model: str
    tokens: int  # tokens generated (server-counted)
    startup_s: float  # launch until /health 200, model load and warm-up included
    tokens_per_s: float  # llama.cpp's own decode rate (timings.predicted_per_second)
    text: str  # what it generated, for the eye
    log: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def default_log_path() -> Path:
    """Where the smoke check's server log goes (kept for reading after a failure)."""
    return cache_dir() / "smoke" / "llama-server.log"


def smoke_check(binary: Path | None = None, model: Path | None = None, n_tokens: int = 8,
                threads: int | None = None, log_path: Path | None = None,
                timeout_s: float = 120.0) -> SmokeResult:
    """Start llama-server on ``model`` (None: the bundled Gemma 3 270M), generate
    ``n_tokens`` at temperature 0, stop it.

    Raises :class:`ServerLaunchError` with one line that names a fatal signal, says how
    to rebuild and where the log is.
    """
    log = log_path or default_log_path()
    server = LlamaServer(LlamaCppSettings(binary=binary, model=model, threads=threads),
                         capacity=512)
    try:
        server.start(log, ready_timeout_s=timeout_s)
        body = {"prompt": SMOKE_PROMPT, "n_predict": n_tokens, "temperature": 0,
                "ignore_eos": True, "cache_prompt": False}
        answer = httpx.post(f"{server.base_url}/completion", json=body, timeout=timeout_s)
        answer.raise_for_status()
        data = answer.json()
    except (KvlabError, httpx.HTTPError, ValueError) as exc:
        # A request cut by the server's death can beat the kernel's reaping of it:
        # give it a moment, and ask before `finally` stops it.
        died = server.exit_description(wait_s=2.0)
        raise ServerLaunchError(_failure_line(died, exc, log)) from None
    finally:
        server.stop()
    tokens = int(data.get("tokens_predicted", 0))
    if tokens != n_tokens:
        raise ServerLaunchError(f"llama-server smoke check: asked for {n_tokens} tokens, got "
                                f"{tokens}; see {log}")
    return SmokeResult(
        binary=str(server.binary.path) if server.binary else "?",
        model=str(server.model.path) if server.model else "?",
        tokens=tokens, startup_s=round(server.startup_s or 0.0, 2),
        tokens_per_s=round(float(data.get("timings", {}).get("predicted_per_second", 0.0)), 1),
        text=str(data.get("content", "")), log=str(log))


def _failure_line(died: str | None, exc: Exception, log: Path) -> str:
    """One line: what died and how (``died``: None if it still ran), what to do, the log."""
    if died is None:  # still running (or never started): the error itself says why
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"llama-server smoke check failed: {reason}; log: {log}"
    fix = REBUILD_HINT if "SIGILL" in died else "see the log"
    return f"llama-server smoke check failed: it {died} before generating a token; " \
           f"{fix}; log: {log}"
