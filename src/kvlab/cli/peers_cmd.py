"""``kvlab peers setup`` and ``kvlab peers crosscheck``: the tools users already run."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import typer

from kvlab.cli._app import BENCHMARK, app, console, err_console, print_json

peers_app = typer.Typer(
    help="GuideLLM, AIPerf and vLLM's bench serve, in environments of their own, and "
         "the cross-check that runs them beside kvlab on a known schedule.",
    no_args_is_help=True,
)
app.add_typer(peers_app, name="peers", rich_help_panel=BENCHMARK)


def _say(line: str) -> None:
    err_console.print(f"peers: {line}", markup=False, highlight=False)


@peers_app.command("setup")
def setup(
    vllm: bool = typer.Option(
        True, "--vllm/--no-vllm",
        help="Also make (or check) vLLM's environment and its tokenizer for vllm bench "
             "serve; --no-vllm when kvlab vllm setup just ran (make test)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Install the peers where kvlab runs them, never in kvlab's own environment:
    GuideLLM 0.8.1 and AIPerf 0.13.0 each in a virtual environment of its own under
    ~/.cache/kvlab/peers (GuideLLM with the CPU torch first), and vLLM's environment
    (kvlab vllm setup, no smoke check) for vllm bench serve, with the bundled Gemma 3
    270M converted, whose tokenizer AIPerf and vLLM's client read.

    About 2 min per environment the first time; what exists and works is only probed
    (under a second). Example: kvlab peers setup && kvlab peers crosscheck
    """
    from kvlab.crosscheck.envs import create_peer_envs
    from kvlab.servers.vllm_setup import setup_vllm

    done: dict[str, dict[str, object]] = {}
    started = time.monotonic()
    for name, (env, seconds) in create_peer_envs(progress=_say).items():
        done[name] = {"executable": str(env.executable), "version": env.version,
                      "seconds": round(seconds, 1)}
    if vllm:
        vllm_started = time.monotonic()
        made = setup_vllm(smoke=False, progress=_say)
        done["vllm-bench"] = {"executable": made.python, "version": made.version,
                              "tokenizer": made.model,
                              "seconds": round(time.monotonic() - vllm_started, 1)}
    total = round(time.monotonic() - started, 1)
    if json_out:
        print_json({**done, "total_seconds": total})
        return
    for name, facts in done.items():
        console.print(f"{name} {facts['version']}: {facts['executable']} "
                      f"({facts['seconds']} s)", markup=False, highlight=False)
    console.print(f"peers set up in {total} s", markup=False, highlight=False)


@peers_app.command("crosscheck")
def crosscheck(
    out: Path = typer.Option(Path("results/crosscheck"), "--out",
                             help="Folder for every client's files and crosscheck.json."),
    clients: str = typer.Option("kvlab,guidellm,aiperf,vllm-bench", "--clients",
                                help="Clients to run, comma-separated, in round 1's order."),
    ttft_ms: float = typer.Option(20.0, min=1.0, help="The server's time to first token."),
    itl_ms: float = typer.Option(20.0, min=1.0, help="The server's gap between tokens."),
    tokens: int = typer.Option(16, min=2, help="Forced output tokens per request."),
    requests: int = typer.Option(12, min=5, help="Requests per client and round."),
    rounds: int = typer.Option(2, min=1, help="Rounds (the order rotates each round)."),
    json_out: bool = typer.Option(False, "--json", help="Print crosscheck.json."),
) -> None:
    """Measure kvlab serve-synthetic with kvlab, GuideLLM, AIPerf and vllm bench serve,
    back to back in rounds, and state each client's TTFT and ITL error against the
    schedule: median and p99 with 95 % intervals. Each peer's result file is read back
    by kvlab and checked against what the peer printed (same requests, same median TTFT
    to 0.1 %). A client that fails is one line; the rest go on. Exit 1 when a client
    failed, a median error is outside the tolerance (half a token gap), a request was not
    counted or a round trip did not hold.

    Example (about 3 min once the peers are installed with kvlab peers setup):
    kvlab peers crosscheck --out results/crosscheck
    """
    from kvlab.crosscheck.accuracy import Schedule
    from kvlab.crosscheck.result import markdown
    from kvlab.crosscheck.rounds import run_crosscheck

    names = [c.strip() for c in clients.split(",") if c.strip()]
    command = "kvlab " + " ".join(shlex.quote(a) for a in sys.argv[1:]) \
        if sys.argv[1:2] == ["peers"] else "kvlab peers crosscheck"
    result = run_crosscheck(out, Schedule(ttft_ms=ttft_ms, itl_ms=itl_ms, tokens=tokens,
                                          requests=requests, rounds=rounds),
                            clients=names, command=command, progress=_say)
    if json_out:
        print_json(result.model_dump())
    else:
        console.print(markdown(result), markup=False, highlight=False)
    if not result.ok:
        raise typer.Exit(1)
