"""The Ray driver without starting Ray: which driver a run uses, its refusals, and the
loopback check (tests/run/test_workers_ray.py runs it on Ray)."""

from __future__ import annotations

import sys

import pytest

from kvlab.bench.client.endpoints import Endpoint
from kvlab.bench.drivers.inprocess import InProcessSettings
from kvlab.bench.drivers.kinds import saved_driver
from kvlab.bench.drivers.ray import RayDriver, RayDriverSettings, loopback
from kvlab.bench.workers.ray_pool import RayPool, RaySettings
from kvlab.errors import ConfigError
from kvlab.records import ApiKind
from kvlab.run.planner import choose_driver
from kvlab.store.state import InvocationEntry, RunState


def test_the_command_line_wins_over_the_file_and_none_means_one_process(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", object())  # installed, as far as the check goes
    assert choose_driver(None, None) == InProcessSettings()
    assert choose_driver(None, 3) == RayDriverSettings(count=3)
    assert choose_driver(RayDriverSettings(count=2), 3) == RayDriverSettings(count=2)
    on = RayDriverSettings(address="10.0.0.5:6379", per_node=4)
    assert choose_driver(on, None).pool_settings() == RaySettings(None, "10.0.0.5:6379", 4)
    # an address alone: the file's count, else a refusal that says what to add
    alone = RayDriverSettings(address="h:1")
    assert choose_driver(alone, 2).pool_settings() == RaySettings(2, "h:1")
    with pytest.raises(ConfigError, match="--workers N or --workers-per-node K"):
        choose_driver(alone, None).check(shares_points=True)
    with pytest.raises(ConfigError, match="load is sequential"):
        RayDriverSettings(count=2).check(shares_points=False)
    InProcessSettings().check(shares_points=False)  # one process runs anything


def test_without_ray_the_line_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ConfigError) as info:
        RayDriverSettings(count=2).check(shares_points=True)
    assert "pip install 'kvlab[ray]'" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("url", "local"), [
    ("http://127.0.0.1:8080", True), ("http://localhost:8080/v1", True),
    ("http://[::1]:8080", True), ("http://127.3.2.1", True),
    ("http://10.0.0.5:8080", False), ("https://api.example.com/v1", False)])
def test_loopback_urls(url, local) -> None:
    assert loopback(url) is local


def test_a_worker_on_another_machine_cannot_be_sent_to_loopback() -> None:
    driver = RayDriver(RaySettings(workers=2))
    pool = RayPool(RaySettings(workers=1))  # never started: only its facts are read
    pool.facts = {"workers": [{"worker": 0, "host": "elsewhere"}]}
    driver.pool = pool
    with pytest.raises(ConfigError, match=r"workers on elsewhere cannot reach 127\.0\.0\.1"):
        driver.check_reachable(Endpoint("http://127.0.0.1:8080", ApiKind.OPENAI_CHAT))
    driver.check_reachable(Endpoint("http://10.0.0.5:8080", ApiKind.OPENAI_CHAT))


def test_the_state_keeps_the_choice_and_the_last_invocations_worker_count() -> None:
    asked = RayDriverSettings(count=2, address="h:1")
    state = RunState(workers=asked.model_dump(mode="json"))
    assert state.load_workers() is None
    state.invocations += [InvocationEntry(workers={"count": 3}), InvocationEntry(),
                          InvocationEntry(workers={"count": 2})]
    again = RunState.model_validate_json(state.dumps())
    assert saved_driver(again.workers) == asked
    assert again.load_workers() == 2
    # a manifest from before drivers had kinds kept Ray's settings without one
    assert saved_driver({"count": 2, "address": "h:1", "per_node": None}) == asked
    assert saved_driver(None) is None
