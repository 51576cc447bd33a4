"""The sessions load: its table, its points, and what the rest of the experiment must
give it (a session dataset, a chat API)."""

from __future__ import annotations

import pytest

from kvlab.bench.plan.loads.sessions import SessionRatePoint, SessionsPoint
from kvlab.errors import ExperimentError
from kvlab.experiment import load_experiment
from tests.experiments import embedded, experiment

SESSIONS = {"kind": "random-sessions", "sessions": 2, "turns": {"value": 3},
            "input": {"value": 8}}


def load(tmp_path, load=None, dataset=None, api="openai-chat"):
    path = experiment("s", embedded("a", api), workload=dict(capacities=[512]),
                      dataset=SESSIONS if dataset is None else dataset,
                      load=load or dict(kind="sessions", values=[1, 2])).write(tmp_path)
    return load_experiment(path)


def test_a_closed_sweep_is_sessions_at_once_and_an_open_one_session_arrivals(tmp_path):
    points = load(tmp_path).load.points(6)
    assert [p.label for p in points] == ["sessions=1", "sessions=2"]
    assert all(isinstance(p, SessionsPoint) and p.planned_requests() == 6 for p in points)
    rate = load(tmp_path, dict(kind="sessions", arrival="poisson", values=[0.5],
                               max_sessions=2)).load
    (point,) = rate.points(6)
    assert isinstance(point, SessionRatePoint) and point.label == "session_rate=0.5"
    assert rate.in_flight_cap() == 2 and "0.5 sessions/s poisson" in point.describe()


@pytest.mark.parametrize(("table", "dataset", "api", "message"), [
    (dict(kind="sessions", values=[1.5]), None, "openai-chat",
     "values: a closed loop's values are whole numbers of sessions"),
    (dict(kind="sessions", values=[2], max_sessions=2), None, "openai-chat",
     'max_sessions caps an open loop'),
    (dict(kind="sessions"), None, "openai-chat", "load.values: a sessions load needs values"),
    (dict(kind="sessions", values=[2]), {"kind": "builtin"}, "openai-chat",
     'a sessions load sends the turns of sessions; set \\[workload.dataset\\] kind'),
    (dict(kind="concurrency", values=[2]), None, "openai-chat",
     'the rows of a sessions dataset are turns .* set \\[load\\] kind = "sessions"'),
    (dict(kind="sessions", values=[2]), None, "llamacpp-completion",
     "modes\\[0\\].api: a sessions load sends each turn's history as chat messages"),
])
def test_what_a_sessions_load_refuses_in_one_line(tmp_path, table, dataset, api, message):
    with pytest.raises(ExperimentError, match=message):
        load(tmp_path, table, dataset, api)
