"""Cross-check kvlab's peer definitions against GuideLLM and AIPerf, in one session.

One server of each target (kvlab's embedded server, llama-server with the bundled
Gemma 3 270M) is started once; ``kvlab run --no-launch`` measures it, then GuideLLM
and AIPerf measure the same server with the same prompts (read back from kvlab's
records), the same output length (64 forced tokens: ignore_eos) and one request at a
time. For each tool the table shows the median and p95 of TTFT, ITL, TPOT and e2e as
kvlab computes them under that tool's definitions (analysis.definitions), next to what the
tool itself reported.

No model is downloaded: GuideLLM needs no tokenizer when it reads prompts from a file
and the server returns usage; AIPerf needs one, so it gets the Gemma tokenizer
converted from the bundled GGUF by transformers (``--tokenizer-dir``), and
``--use-server-token-count`` so its OSL is the server's count, as kvlab's is.

Set-up: `kvlab peers setup` installs both peers in environments of their own (and
converts the bundled Gemma for vLLM, whose folder holds the tokenizer AIPerf reads);
this tool uses them by default:

    kvlab peers setup
    python tools/peer_crosscheck.py --queries 20

The client-clock cross-check on a known schedule, all four clients in rounds, is
``kvlab peers crosscheck`` (kvlab.crosscheck), which ``make test`` runs.

Prints one markdown table per target (and writes them to OUT/crosscheck.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from kvlab.analysis import definition_cells as d
from kvlab.analysis.valid_rows import current_rows
from kvlab.analysis.validate import check_row
from kvlab.rundir import Record, read_records
from kvlab.servers.process import free_port

CAPACITY, OUTPUT = 1024, 64
BODY = {"ignore_eos": True, "temperature": 0, "seed": 42, "cache_prompt": False}
METRICS = (("ttft_ms", "TTFT"), ("itl_ms", "ITL"), ("tpot_ms", "TPOT"), ("e2e_ms", "e2e"))


def start(argv: list[str], url: str, log: Path,
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a server and wait for its /health (90 s at most)."""
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True, env={**os.environ, **(env or {})})
    for _ in range(180):
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"{argv[0]} never answered {url}/health; see {log}")


def experiment(queries: int, targets: list[str]) -> str:
    """kvlab's experiment: one OpenAI chat streaming mode per target, named after it."""
    modes = "".join(
        f'[[modes]]\nname = "{name}"\nserver = "{name}"\napi = "openai-chat"\n'
        'stream = true\n[modes.body]\nstream_options = { include_usage = true }\n'
        for name in targets)
    return (f'name = "crosscheck"\n[workload]\nqueries = {queries}\ncapacities = [{CAPACITY}]\n'
            f'prompt_fraction = 0.5\noutput_tokens = {OUTPUT}\nwarmup = 1\n[protocol]\n'
            'temperature = 0.0\nseed = 42\nignore_eos = true\ncache_prompt = false\n' + modes)


def guidellm(exe: str, url: str, model: str, prompts: list[str], out: Path) -> dict[str, Any]:
    """Run GuideLLM (synchronous, the prompts once each); its report's figures (ms)."""
    data = out / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    scenario = {"spec": {
        "backend": {"kind": "openai_http", "target": url, "model": model,
                    "request_format": "/v1/chat/completions", "max_tokens": OUTPUT,
                    "extras": {"body": BODY}},
        "profile": {"kind": "synchronous"},
        "data": [{"kind": "json_file", "path": str(data)}],
        "constraints": [{"kind": "max_requests", "count": len(prompts)}],
        "outputs": [{"kind": "json", "path": str(out / "benchmarks.json")}],
    }}
    (out / "scenario.json").write_text(json.dumps(scenario))
    subprocess.run([exe, "run", "--scenario", str(out / "scenario.json"),
                    "--disable-console-interactive"], check=True,
                   stdout=(out / "guidellm.log").open("wb"), stderr=subprocess.STDOUT)
    report = json.loads((out / "benchmarks.json").read_text())["benchmarks"][0]["metrics"]

    def pick(key: str, scale: float = 1.0) -> tuple[float, float]:
        s = report[key]["successful"]
        return s["median"] * scale, s["percentiles"]["p95"] * scale

    return {"ttft_ms": pick("time_to_first_token_ms"), "itl_ms": pick("inter_token_latency_ms"),
            "tpot_ms": pick("time_per_output_token_ms"), "e2e_ms": pick("request_latency", 1e3)}


def aiperf(exe: str, url: str, model: str, prompts: list[str], out: Path,
           tokenizer: Path) -> dict[str, Any]:
    """Run AIPerf (concurrency 1, the prompts once each); its export's figures (ms)."""
    data = out / "prompts.jsonl"
    data.write_text("".join(json.dumps({"text": p}) + "\n" for p in prompts))
    extras = [a for k, v in {**BODY, "max_tokens": OUTPUT}.items()
              for a in ("--extra-inputs", f"{k}:{json.dumps(v)}")]
    subprocess.run([exe, "profile", "--model", model, "--tokenizer", str(tokenizer), "--url",
                    url, "--endpoint-type", "chat", "--streaming", "--input-file", str(data),
                    "--custom-dataset-type", "single_turn", "--use-server-token-count",
                    "--request-count", str(len(prompts)), "--concurrency", "1",
                    "--artifact-dir", str(out), "--ui-type", "none", *extras], check=True,
                   stdout=(out / "aiperf.log").open("wb"), stderr=subprocess.STDOUT)
    report = json.loads((out / "profile_export_aiperf.json").read_text())
    return {key: (report[tag]["p50"], report[tag]["p95"]) for key, tag in
            (("ttft_ms", "time_to_first_token"), ("itl_ms", "inter_token_latency"),
             ("e2e_ms", "request_latency"))}


def table(rows: list[Record], tool: str, reported: dict[str, Any], peer_file: Path,
          prompt_tokens: float | None) -> list[str]:
    """Markdown rows per metric: kvlab's run and the tool's own file (read by
    peers), both under the tool's definitions, against the tool's report."""
    from kvlab.peers import read_peer_file

    imported = [r for r in read_peer_file(peer_file, OUTPUT) if not r.warmup]
    ours, _ = d.under(rows, tool)
    again, _ = d.under([r for r in imported if not check_row(r)], tool)
    lines = []
    for key, label in METRICS:
        mine, theirs, same = ours[key], reported.get(key), again[key]
        if mine.count == 0 or theirs is None or same.count == 0:
            continue
        diff = mine.median - theirs[0]
        ok = abs(diff) <= max(0.02 * abs(theirs[0]), 0.5)
        lines.append(f"| {tool} | {label} | {mine.median:.2f} / {mine.p95:.2f} | "
                     f"{same.median:.2f} / {same.p95:.2f} | "
                     f"{theirs[0]:.2f} / {theirs[1]:.2f} | {same.median - theirs[0]:+.3f} | "
                     f"{diff:+.2f} ({'within' if ok else 'outside'}) |")
    def perimeter(rs: list[Record]) -> str:
        """Median ms of sent → first byte and last content → end: the client's share."""
        def med(a: str, b: str) -> str:
            gaps = [(getattr(r, b) - getattr(r, a)) / 1e6 for r in rs
                    if getattr(r, a) is not None and getattr(r, b) is not None]
            return f"{statistics.median(gaps):.2f}" if gaps else "—"
        return (f"{med('t_sent', 't_first_chunk')} / {med('t_first_chunk', 't_first_content')}"
                f" / {med('t_last_content', 't_end')}")

    lines.append(f"| {tool} | sent → first byte / → first content / last content → end "
                 f"(median ms) | {perimeter(rows)} | {perimeter(imported)} | | | |")
    peer_prompt = [r.prompt_tokens for r in imported if r.prompt_tokens is not None]
    if peer_prompt and prompt_tokens is not None:
        lines.append(f"| {tool} | prompt tokens (mean, server-counted) | {prompt_tokens:.1f} "
                     f"| {sum(peer_prompt) / len(peer_prompt):.1f} | | | |")
    return lines


def _installed(name: str) -> str | None:
    """The peer kvlab installed (kvlab peers setup), else one on PATH."""
    from kvlab.crosscheck.envs import find_peer
    from kvlab.errors import KvlabError

    try:
        return str(find_peer(name).executable)
    except KvlabError:
        return shutil.which(name)


def _tokenizer() -> Path | None:
    from kvlab.crosscheck.rounds import tokenizer_dir
    from kvlab.errors import KvlabError

    try:
        return tokenizer_dir()
    except KvlabError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guidellm", default=_installed("guidellm"))
    parser.add_argument("--aiperf", default=_installed("aiperf"))
    parser.add_argument("--tokenizer-dir", type=Path, default=_tokenizer(),
                        help="AIPerf's tokenizer (local dir)")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--targets", default="embedded,llamacpp")
    parser.add_argument("--out", type=Path, default=Path("results/crosscheck"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    kvlab = [sys.executable, "-m", "kvlab"]
    from kvlab.servers.binary import find_llama_server
    from kvlab.servers.fetch import bundled_model_path

    targets = [t for t in args.targets.split(",") if t]
    binary = find_llama_server() if "llamacpp" in targets else None
    servers = {
        "embedded": ([*kvlab, "serve", "--ctx-size", str(CAPACITY), "--threads", "1"],
                     "toy"),
        "llamacpp": ([str(binary.path) if binary else "llama-server", "-m",
                      str(bundled_model_path()), "-c", str(CAPACITY), "-t", "1", "-np", "1"],
                     "gemma"),
    }
    procs, urls = [], {}
    try:
        for name in targets:
            port = free_port()
            argv, _ = servers[name]
            urls[name] = f"http://127.0.0.1:{port}"
            procs.append(start([*argv, "--port", str(port)], urls[name],
                               args.out / f"{name}-server.log",
                               binary.env_overrides if binary and name == "llamacpp" else None))
        exp = args.out / "crosscheck.toml"
        exp.write_text(experiment(args.queries, targets))
        ends = [a for n in targets for a in ("--endpoint", f"{n}={urls[n]}")]
        run_parent = args.out / "runs"

        def kvlab_run() -> tuple[Path, list[Record]]:
            subprocess.run([*kvlab, "run", str(exp), "--no-launch", *ends, "--out",
                            str(run_parent), "-q"], check=True, stdout=subprocess.DEVNULL)
            run = sorted(run_parent.iterdir())[-1]
            records = current_rows(read_records(run / "records.jsonl"))
            return run, [r for r in records if not check_row(r)]

        run, rows = kvlab_run()
        out = ["| tool | metric | kvlab's run, tool's definitions | tool's file read by "
               "kvlab, tool's definitions | tool's own report | file − report (median) | "
               "kvlab − tool (median; goal max(2 %, 0.5 ms)) |", "|---|---|---|---|---|---|---|"]
        report = [f"kvlab run: {run}", ""]
        sections: dict[str, list[str]] = {}
        for name in targets:
            mode_rows = [r for r in rows if r.mode == name]
            prompts = [r.prompt or "" for r in mode_rows]
            counted = [r.prompt_tokens for r in mode_rows if r.prompt_tokens is not None]
            mean_prompt = sum(counted) / len(counted) if counted else None
            lines = list(out)
            model = servers[name][1]
            if args.guidellm:
                where = args.out / f"{name}-guidellm"
                where.mkdir(exist_ok=True)
                lines += table(mode_rows, "guidellm",
                               guidellm(args.guidellm, urls[name], model, prompts, where),
                               where / "benchmarks.json", mean_prompt)
            if args.aiperf and args.tokenizer_dir:
                where = args.out / f"{name}-aiperf"
                where.mkdir(exist_ok=True)
                lines += table(mode_rows, "aiperf", aiperf(args.aiperf, urls[name], model,
                                                           prompts, where, args.tokenizer_dir),
                               where / "profile_export.jsonl", mean_prompt)
            sections[name] = [f"### {name} ({len(mode_rows)} requests, {OUTPUT} tokens each)",
                              "", *lines, ""]
        again_run, again = kvlab_run()  # the same kvlab run once more: its noise floor
        for name in targets:
            first = d.under([r for r in rows if r.mode == name], "kvlab")[0]
            second = d.under([r for r in again if r.mode == name], "kvlab")[0]
            floor = ", ".join(f"{label} {first[k].median:.2f} → {second[k].median:.2f}"
                              for k, label in METRICS if first[k].count and second[k].count)
            sections[name] += [f"kvlab A/A (the first kvlab run, then {again_run.name} after "
                               f"the tools; medians ms, kvlab's definitions): {floor}", ""]
            report += sections[name]
        text = "\n".join(report)
        (args.out / "crosscheck.md").write_text(text)
        print(text)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
