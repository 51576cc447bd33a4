"""End to end against the real embedded server: a run interrupted, then resumed."""

from __future__ import annotations

import json

import pytest

from kvlab.bench.records import read_records
from kvlab.bench.runner import SilentReporter, evaluate_run, run_experiment
from kvlab.errors import RunInterrupted

TINY = """
name = "tiny"
compare = [["llama", "llama-nocache"]]
[workload]
queries = 2
capacities = [128]
output_tokens = 8
[[modes]]
name = "llama"
api = "llamacpp-completion"
[modes.embedded]
threads = 1
[[modes]]
name = "llama-nocache"
api = "llamacpp-completion"
[modes.embedded]
threads = 1
no_cache = true
[[modes]]
name = "chat"
api = "openai-chat"
[modes.embedded]
threads = 1
"""


class StopAfter(SilentReporter):
    """Simulates Ctrl-C after ``n`` measured records."""

    def __init__(self, n: int) -> None:
        self.n = n

    def advance(self, record) -> None:
        self.n -= 1
        if self.n == 0:
            raise KeyboardInterrupt


@pytest.mark.slow
def test_interrupted_run_resumes_without_duplicates(tmp_path) -> None:
    experiment = tmp_path / "tiny.toml"
    experiment.write_text(TINY)
    with pytest.raises(RunInterrupted) as info:
        run_experiment(experiment, out=tmp_path / "runs", reporter=StopAfter(3))
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert f"resume with: kvlab run --resume {run_dir}" in str(info.value)
    kept = read_records(run_dir / "records.jsonl")
    assert sum(not r.warmup for r in kept) == 3

    result = run_experiment(None, resume=run_dir)
    records = read_records(run_dir / "records.jsonl")
    measured = [r.key for r in records if not r.warmup]
    assert len(measured) == len(set(measured)) == 6  # 3 modes x 2 queries, none twice
    assert sum(r.warmup for r in records) == 4  # one per server started (llama twice)

    # same prompts for every mode at the capacity (the chat mode adds its template)
    by_query = {}
    for r in records:
        if not r.warmup:
            by_query.setdefault(r.query_id, set()).add(r.prompt_sha256)
    assert all(len(shas) == 1 for shas in by_query.values())

    evaluation = result.evaluation
    assert evaluation.counts["refused_rows"] == 0, [str(v) for v in evaluation.violations]
    assert [c.status for c in evaluation.comparisons] == ["ok"]
    chat = evaluation.summary("chat", 128)
    assert chat is not None and chat.queries == 2 and chat.ttft_ms["mean"] > 0

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["experiment_file"] == TINY
    assert len(manifest["sessions"]) == 2 and "cores" in manifest["host"]
    assert all("--ctx-size" in s["facts"]["argv"] for s in manifest["servers"])
    assert (run_dir / "logs" / "chat-128.log").exists()
    prepared = json.loads((run_dir / "prepared.json").read_text())
    assert prepared["output_tokens"] == 8 and len(prepared["prompts"]["128"]) == 2

    report = (run_dir / "report.md").read_text()
    for section in ("## Protocol", "## Metric definitions", "## Validation",
                    "## Summaries", "## Comparisons", "## Manifest essentials"):
        assert section in report
    assert "llama / llama-nocache" in report

    # evaluate is reproducible from records alone
    again = evaluate_run(run_dir)
    assert again.to_json() == json.loads((run_dir / "evaluation.json").read_text())
