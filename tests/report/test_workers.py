"""The report's "Load workers and clocks" section, from a manifest and records."""

from __future__ import annotations

from kvlab.records import ApiKind, Outcome, Record
from kvlab.report.workers import workers_markdown


def rec(worker: int | None, warmup: bool = False) -> Record:
    return Record(run_id="r", mode="chat", capacity=256, query_id="q", load="c=2",
                  worker=worker, warmup=warmup, api=ApiKind.OPENAI_CHAT, path="/",
                  stream=True, prompt_sha256="", requested_tokens=1, t_sent=0, t_end=1,
                  outcome=Outcome.OK)


MANIFEST = {
    "sessions": [{"workers": {  # a manifest from before invocations had their name
        "engine": "ray", "ray_version": "2.60.0", "address": "10.0.0.5:6379", "count": 2,
        "nodes": 2, "workers": [{"worker": 0, "host": "a", "cores": 8},
                                {"worker": 1, "host": "b", "cores": 4}]}}],
    "worker_clocks": [{"mode": "chat", "capacity": 256, "load": "c=2", "clocks": [
        {"worker": 0, "requests": 3, "offset_ns": 1_500_000, "error_ns": 250_000,
         "rtt_ns": 500_000, "exchanges": 16},
        {"worker": 1, "requests": 2, "offset_ns": -40_000, "error_ns": 410_000,
         "rtt_ns": 820_000, "exchanges": 16}]}],
}


def test_the_section_gives_each_offset_with_its_bound_beside_the_rows() -> None:
    records = [rec(0), rec(0), rec(0), rec(1), rec(1, warmup=True), rec(None, warmup=True)]
    text = workers_markdown(MANIFEST, records)
    assert text.startswith("\n## Load workers and clocks\n")
    assert "2 load workers (Ray 2.60.0, the Ray cluster at 10.0.0.5:6379) on 2 node(s): " \
           "a (1 worker, 8 cores), b (1 worker, 4 cores)" in text
    assert "| chat | 256 | c=2 | 0 | a | 3 | 3 | 1.500 | 0.250 | 0.500 |" in text
    # worker 1 planned 2, recorded 1 measured row (its warm-up does not count)
    assert "| chat | 256 | c=2 | 1 | b | 2 | 1 | -0.040 | 0.410 | 0.820 |" in text
    assert "Largest bound: ± 0.410 ms" in text
    assert "no duration crosses two clocks" in text


def test_a_run_of_one_process_has_no_section() -> None:
    assert workers_markdown({"sessions": [{"modes": ["a"]}]}, [rec(None)]) == ""
