"""Shared test set-up."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from kvlab.engine.gemma import Gemma3
    from kvlab.engine.gguf_tokenizer import GGUFTokenizer

# No per-example deadline (Hypothesis's default is 200 ms): one example preempted on a
# loaded machine would fail a property that holds. Speed is measured by benchmarks.
settings.register_profile("kvlab", deadline=None)
settings.load_profile("kvlab")

# What a developer's shell may hold that changes what kvlab reads or prints. CI sets
# none of them; a newcomer may have any (a key for their own server, a terminal width,
# forced colours), so the suite runs without them.
LEAKED_VARIABLES = (
    "KVLAB_API_KEY",  # kvlab serve --api-key: every server a test starts would want a key
    "VLLM_BASE_URL", "VLLM_MODEL_ID", "VLLM_API_KEY", "VLLM_ENDPOINT_NAME",  # endpoints
    "COLUMNS", "LINES", "TERMINAL_WIDTH", "JUPYTER_COLUMNS", "JUPYTER_LINES",  # width
    "FORCE_COLOR", "PY_COLORS", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "GITHUB_ACTIONS",  # colour
    "TYPER_USE_RICH", "TYPER_STANDARD_TRACEBACK", "_TYPER_STANDARD_TRACEBACK",  # errors
    "PYTHONWARNINGS",  # extra lines on the stderr of every kvlab process a test starts
)
LEAKED_PREFIXES = ("OPENAI_",)  # OPENAI_BASE_URL_<n>, OPENAI_MODEL_<n>, ...: endpoints


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module imports kvlab (rich and Typer read some of these once, at
    import): drop the leaked variables, and never ask the Hugging Face Hub."""
    for name in list(os.environ):
        if name in LEAKED_VARIABLES or name.startswith(LEAKED_PREFIXES):
            del os.environ[name]
    os.environ["HF_HUB_OFFLINE"] = "1"
    # Every `kvlab run` of the suite (module fixtures and subprocesses included) adds its
    # run to a history of the suite's own, never to the developer's (kvlab history).
    os.environ["KVLAB_HISTORY"] = str(Path(tempfile.mkdtemp(prefix="kvlab-test-history-"))
                                      / "history.duckdb")


@pytest.fixture(autouse=True)
def _no_machine_calibration(tmp_path_factory: pytest.TempPathFactory,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs and reports read this machine's client limits (``kvlab calibrate``); tests
    must not depend on whether the developer ever ran it, so none is found."""
    path: Path = tmp_path_factory.getbasetemp() / "no-calibration.json"
    monkeypatch.setenv("KVLAB_CALIBRATION", str(path))


def llama_server_missing() -> str | None:
    """Why the real llama-server tests cannot run here (None when they can): the
    binary or the bundled Gemma 3 270M model is missing."""
    from kvlab.errors import KvlabError
    from kvlab.servers.binary import find_llama_server
    from kvlab.servers.fetch import fetch_bundled

    try:
        find_llama_server()
        fetch_bundled()
    except KvlabError as exc:
        return f"llama-server or the bundled model is missing: {exc}"
    return None


def vllm_missing() -> str | None:
    """Why the real vLLM tests cannot run here (None when they can): no vLLM environment
    (``kvlab vllm setup``, or KVLAB_VLLM_PYTHON) or no bundled model. ``make test`` sets
    KVLAB_REQUIRE_VLLM=1 after setting vLLM up, so there a missing vLLM fails these
    tests instead of skipping them."""
    from kvlab.errors import KvlabError
    from kvlab.servers.fetch import fetch_bundled
    from kvlab.servers.vllm_env import find_vllm

    try:
        find_vllm()
        fetch_bundled()
    except KvlabError as exc:
        if os.environ.get("KVLAB_REQUIRE_VLLM") == "1":
            pytest.fail(f"KVLAB_REQUIRE_VLLM=1 but vLLM is not usable: {exc}")
        return f"no vLLM here: {exc}"
    return None


def peers_missing() -> str | None:
    """Why the peers' clients cannot run here (None when they can): GuideLLM or AIPerf
    not installed for kvlab (``kvlab peers setup``), or no vLLM for ``vllm bench
    serve``. ``make test`` sets KVLAB_REQUIRE_PEERS=1 after setting them up, so there
    a missing peer fails these tests instead of skipping them."""
    from kvlab.crosscheck.envs import PINS, find_peer
    from kvlab.errors import KvlabError
    from kvlab.servers.vllm_env import find_vllm

    try:
        for name in PINS:
            find_peer(name)
        find_vllm()
    except KvlabError as exc:
        if os.environ.get("KVLAB_REQUIRE_PEERS") == "1":
            pytest.fail(f"KVLAB_REQUIRE_PEERS=1 but a peer is not usable: {exc}")
        return f"the peers are not installed here: {exc}"
    return None


# The real Gemma 3 270M, shared by tests/engine and tests/studies: loaded once per session.


def _bundled_gguf() -> tuple[Path | None, str]:
    from kvlab.errors import KvlabError
    from kvlab.servers.fetch import fetch_bundled

    try:
        return fetch_bundled().path, ""
    except KvlabError as exc:
        return None, f"the bundled Gemma 3 270M model is missing: {exc}"


@pytest.fixture(scope="session")
def gemma_gguf() -> Path:
    """The bundled Gemma 3 270M GGUF (the test is skipped, with the reason, without it)."""
    path, reason = _bundled_gguf()
    if path is None:
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def gemma_model(gemma_gguf: Path) -> Gemma3:
    """The engine's Gemma 3 270M in float32, loaded once per session (~20 s)."""
    import torch

    from kvlab.engine.gguf_weights import load_gemma

    return load_gemma(gemma_gguf, torch.float32)


@pytest.fixture(scope="session")
def gemma_tokenizer(gemma_gguf: Path) -> GGUFTokenizer:
    """The GGUF's tokenizer (converted once per file, then read from kvlab's cache)."""
    from kvlab.engine.gguf_tokenizer import load_gguf_tokenizer
    from kvlab.servers.fetch import check_gguf

    return load_gguf_tokenizer(gemma_gguf, check_gguf(gemma_gguf).tokenizer_json)


def _kernels() -> str:
    """The CPU kernel set torch picked, and the overrides tests/kernel_sets.py sets."""
    import torch

    kernels = torch.backends.cpu.get_cpu_capability()
    for name in ("MKL_CBWR", "ONEDNN_MAX_CPU_ISA"):
        if os.environ.get(name):
            kernels += f", {name}={os.environ[name]}"
    return kernels


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The worst |difference| of each equality-up-to-rounding test against its bound,
    under the kernel set torch picked (tests/rounding.py); as JSON too when
    KVLAB_ROUNDING_REPORT names a file. Then each top-1 agreement with float32 and its
    floor (tests/agreement.py)."""
    _agreement_summary(terminalreporter)
    _rounding_summary(terminalreporter)


def _agreement_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.agreement import AGREEMENTS

    if not AGREEMENTS:
        return
    terminalreporter.section(f"top-1 agreement with float32 (torch CPU kernels: "
                             f"{_kernels()})")
    terminalreporter.write_line(f"{'form':>13} {'positions':>9} {'agree':>6} "
                                f"{'near ties':>9} {'disagree':>8} {'agreement':>9} "
                                f"{'floor':>6}  test")
    for held in AGREEMENTS:
        a = held.agreement
        terminalreporter.write_line(
            f"{a.name:>13} {a.positions:>9} {a.agree:>6} {a.near_ties:>9} "
            f"{a.disagree:>8} {a.rate:>9.1%} {held.floor:>6.0%}  {held.test}")


def _rounding_summary(terminalreporter: pytest.TerminalReporter) -> None:
    import json

    from tests.rounding import MARGINS

    if not MARGINS:
        return
    worst: dict[str, tuple[float, float]] = {}
    for m in MARGINS:
        delta, bound = worst.get(m.test, (0.0, 0.0))
        if m.delta / m.bound >= (delta / bound if bound else -1.0):
            worst[m.test] = (m.delta, m.bound)
    kernels = _kernels()
    terminalreporter.section(f"rounding margins (torch CPU kernels: {kernels})")
    for test, (delta, bound) in sorted(worst.items()):
        sign = "<=" if delta <= bound else "> "
        terminalreporter.write_line(
            f"{delta:10.3g} {sign} {bound:10.3g}  ({delta / bound:7.1%} of the bound)  {test}")
    report = os.environ.get("KVLAB_ROUNDING_REPORT")
    if report:
        Path(report).write_text(json.dumps(
            {"kernels": kernels, "tests": {t: {"delta": d, "bound": b}
                                           for t, (d, b) in sorted(worst.items())}}, indent=1))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``numerics`` every test of a module that checks equality up to rounding
    (it imports a check of tests/rounding.py)."""
    from tests import rounding

    checks = {id(rounding.assert_close_up_to_rounding), id(rounding.assert_same_generation),
              id(rounding.hold_to_bound), id(rounding.assert_no_near_tie)}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and any(id(v) in checks for v in vars(module).values()):
            item.add_marker(pytest.mark.numerics)
