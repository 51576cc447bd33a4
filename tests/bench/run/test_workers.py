"""A session's load workers, without starting Ray: which workers a run uses, and the
loopback check (tests/bench/run/test_workers_ray.py runs them on Ray)."""

from __future__ import annotations

import sys

import pytest

from kvlab.bench.client.endpoints import Endpoint
from kvlab.bench.records import ApiKind
from kvlab.bench.run.workers import RunWorkers, loopback, worker_settings
from kvlab.bench.store.state import RunState, SessionEntry, WorkerChoice
from kvlab.bench.workers.ray_pool import RayPool, RaySettings
from kvlab.errors import ConfigError


def test_the_command_line_wins_over_the_file_and_none_means_one_process(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", object())  # installed, as far as the check goes
    assert worker_settings(None, None, sequential=False) is None
    assert worker_settings(None, 3, sequential=False) == RaySettings(workers=3)
    assert worker_settings(WorkerChoice(count=2), 3, sequential=False) == RaySettings(workers=2)
    on = WorkerChoice(address="10.0.0.5:6379", per_node=4)
    assert worker_settings(on, None, False) == RaySettings(None, "10.0.0.5:6379", 4)
    # an address alone: the file's count, else a refusal that says what to add
    assert worker_settings(WorkerChoice(address="h:1"), 2, False) == RaySettings(2, "h:1")
    with pytest.raises(ConfigError, match="--workers N or --workers-per-node K"):
        worker_settings(WorkerChoice(address="h:1"), None, False)
    with pytest.raises(ConfigError, match="load is sequential"):
        worker_settings(WorkerChoice(count=2), None, sequential=True)


def test_without_ray_the_line_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ConfigError) as info:
        worker_settings(WorkerChoice(count=2), None, sequential=False)
    assert "pip install 'kvlab[ray]'" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("url", "local"), [
    ("http://127.0.0.1:8080", True), ("http://localhost:8080/v1", True),
    ("http://[::1]:8080", True), ("http://127.3.2.1", True),
    ("http://10.0.0.5:8080", False), ("https://api.example.com/v1", False)])
def test_loopback_urls(url, local) -> None:
    assert loopback(url) is local


def test_a_worker_on_another_machine_cannot_be_sent_to_loopback(tmp_path) -> None:
    from kvlab.bench.store.writer import RunWriter

    with RunWriter(tmp_path) as writer:
        workers = RunWorkers(RaySettings(workers=2), RunState(), writer)

        pool = RayPool(RaySettings(workers=1))  # never started: only its facts are read
        pool.facts = {"workers": [{"worker": 0, "host": "elsewhere"}]}
        workers.pool = pool
        with pytest.raises(ConfigError, match=r"workers on elsewhere cannot reach 127\.0\.0\.1"):
            workers.check_reachable(Endpoint("http://127.0.0.1:8080", ApiKind.OPENAI_CHAT))
        workers.check_reachable(Endpoint("http://10.0.0.5:8080", ApiKind.OPENAI_CHAT))


def test_the_state_keeps_the_choice_and_the_last_sessions_worker_count() -> None:
    state = RunState(workers=WorkerChoice(count=2, address="h:1"))
    assert state.load_workers() is None
    state.sessions += [SessionEntry(workers={"count": 3}), SessionEntry(),
                       SessionEntry(workers={"count": 2})]
    again = RunState.model_validate_json(state.dumps())
    assert again.workers == WorkerChoice(count=2, address="h:1")
    assert again.load_workers() == 2
