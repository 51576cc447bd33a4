"""What a plain ``pip install kvlab`` (no engine extra) must do, as commands.

The harness commands work: ``kvlab run`` against ``kvlab serve-synthetic``, ``report``,
``compare``, ``summary``, ``memory``, ``endpoints``. The engine commands answer with
one line naming the extra, exit 2. Run by tests/cli/test_without_engine.py (torch made
unimportable in this venv) and tests/test_client_install.py (a fresh venv without it);
``kvlab`` is the command line that starts kvlab there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.experiments import embedded, experiment

ROOT = Path(__file__).resolve().parents[1]
EXTRA_LINE = "needs the engine extra: pip install 'kvlab[engine]'"

ENGINE_COMMANDS = [
    ["prove"], ["kv-bench", "--contexts", "32"], ["engine-check"], ["engine-speed"],
    ["engine-batch"], ["engine-profile"], ["serve", "--port", "0"],
    ["memory", "-p", "toy", "-L", "192", "--measure"],
]

EMBEDDED = experiment("embedded-without-engine", embedded("toy"),
                      workload=dict(queries=1, capacities=[192], output_tokens=4)).text()


def kvlab_run(kvlab: list[str], *args: str, env: Mapping[str, str] | None = None,
              cwd: Path | None = None, timeout: float = 300
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*kvlab, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(env) if env is not None else None, cwd=cwd, check=False)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    """stdout of a command that must have succeeded."""
    assert done.returncode == 0, f"{done.args}: exit {done.returncode}\n{done.stderr[-3000:]}"
    return done.stdout


@contextlib.contextmanager
def synthetic_server(kvlab: list[str], env: Mapping[str, str] | None = None
                     ) -> Iterator[str]:
    """``kvlab serve-synthetic --port 0`` started with ``kvlab``; yields its base URL."""
    proc = subprocess.Popen([*kvlab, "serve-synthetic", "--port", "0", "--ttft-ms", "5",
                             "--itl-ms", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(env) if env is not None else None)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on" in line, f"{line!r} {proc.stderr.read() if proc.stderr else ''}"
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def check_engine_commands(kvlab: list[str], env: Mapping[str, str] | None = None,
                          tmp: Path | None = None) -> None:
    """Each engine command, and a run with an embedded mode: one line naming the extra,
    exit 2, and nothing written."""
    for argv in ENGINE_COMMANDS:
        done = kvlab_run(kvlab, *argv, env=env, cwd=tmp, timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (argv, done.returncode, done.stderr)
        assert lines[0].startswith(f"error: kvlab {argv[0]}") and EXTRA_LINE in lines[0], \
            lines[0]
    if tmp is not None:
        path = tmp / "embedded.toml"
        path.write_text(EMBEDDED)
        done = kvlab_run(kvlab, "run", str(path), "--out", str(tmp / "embedded-runs"), "-q",
                         env=env, timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert "kvlab serve" in lines[0] and "pip install 'kvlab[engine]'" in lines[0]


def check_harness(kvlab: list[str], tmp: Path, env: Mapping[str, str] | None = None
                  ) -> Path:
    """The harness commands, each checked for what it must print or write; returns the
    run directory of the measured run."""
    ok(kvlab_run(kvlab, "--help", env=env))
    memory = json.loads(ok(kvlab_run(kvlab, "memory", "-p", "gemma-3-270m", "-L", "512,4096",
                                     "--llamacpp", "--json", env=env)).splitlines()[-1])
    assert memory, memory
    ok(kvlab_run(kvlab, "memory", "-p", "gemma-3-270m", "--paged", "16", "--budget-mib", "64",
                 "-L", "512", env=env))
    shipped = (ROOT / "experiments" / "synthetic-endpoint.toml").read_text()
    runs = tmp / "runs"
    with synthetic_server(kvlab, env) as url:
        path = tmp / "synthetic-endpoint.toml"
        path.write_text(shipped.replace("http://127.0.0.1:8090", url))
        checked = kvlab_run(kvlab, "endpoints", "check", "--base-url", f"{url}/v1",
                            "--model", "synthetic", "--api", "openai-chat", env=env)
        assert "ok" in ok(checked) and "synthetic" in checked.stdout
        for out in (runs, tmp / "runs-b"):  # a baseline and a candidate
            ok(kvlab_run(kvlab, "run", str(path), "--queries", "2", "--out", str(out), "-q",
                         env=env))
    (run_dir,) = runs.iterdir()
    (candidate,) = (tmp / "runs-b").iterdir()
    assert (run_dir / "report.md").is_file() and (run_dir / "report.html").is_file()
    rows = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    measured = [row for row in rows if not row["warmup"]]
    assert len(measured) == 4 and all(row["outcome"] == "ok" for row in measured), measured
    ok(kvlab_run(kvlab, "report", str(run_dir), "--csv", env=env))
    assert list(run_dir.glob("*.csv"))
    compared = ok(kvlab_run(kvlab, "compare", str(run_dir), str(candidate), env=env))
    assert "synthetic-chat" in compared, compared
    itself = kvlab_run(kvlab, "compare", str(run_dir), str(run_dir), env=env)
    assert itself.returncode == 2 and "compared with itself" in itself.stderr, itself.stderr
    summary = ok(kvlab_run(kvlab, "summary", str(tmp), env=env))
    assert run_dir.name in summary or "synthetic" in summary, summary
    return run_dir


def blocked_env(blocked: list[str], log: Path) -> dict[str, str]:
    """The environment of :data:`BOOT`: the modules to block, the file that logs tries."""
    return {**os.environ, "KVLAB_TEST_BLOCK": ",".join(blocked),
            "KVLAB_TEST_BLOCK_LOG": str(log)}
