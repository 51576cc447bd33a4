"""--no-launch plans: --endpoint specs checked against the experiment; attached servers;
the target each Launch step reaches."""

from __future__ import annotations

import pytest

from kvlab.errors import ConfigError, EndpointUnreachable
from kvlab.experiment import parse_experiment
from kvlab.run.attached import AttachedServer, accepted_context_sizes, context_size
from kvlab.run.planner import RunRequest, plan_new
from kvlab.run.runplan import Launch
from kvlab.run.targets import ServerTarget, attach_plan, parse_endpoint_specs, redact_url
from tests.experiments import embedded, experiment, external
from tests.ports import refusing_url

TWO = experiment(
    "two", embedded("a"), embedded("b", capacities=[128]), external("ext", "http://127.0.0.1:9"),
    workload=dict(capacities=[128, 256], output_tokens=8))
PARSED = parse_experiment(TWO.text())


def test_mode_at_capacity_wins_over_mode(tmp_path) -> None:
    attach = attach_plan(PARSED, ["a=http://h:1", "a@256=http://h:2/", "b@128=http://h:3"])
    assert attach.url("a", 128) == "http://h:1"
    assert attach.url("a", 256) == "http://h:2"  # trailing slash dropped
    assert attach.url("b", 128) == "http://h:3"
    assert attach.to_manifest() == {"a": "http://h:1", "a@256": "http://h:2",
                                    "b@128": "http://h:3"}
    plan, _ = plan_new(RunRequest(TWO.write(tmp_path), no_launch=True, endpoints=(
        "a=http://h:1", "a@256=http://h:2/", "b@128=http://h:3")))
    urls = {(s.mode, s.capacity): s.url for s in plan.steps if isinstance(s, Launch)}
    assert urls == {("a", 128): "http://h:1", ("a", 256): "http://h:2",
                    ("b", 128): "http://h:3", ("ext", 128): None, ("ext", 256): None}
    target = ServerTarget(plan.mode("a"), Launch("a", 256, urls[("a", 256)]), 10.0)
    assert isinstance(target.server, AttachedServer) and target.server.base_url == "http://h:2"
    outside = ServerTarget(plan.mode("ext"), Launch("ext", 128), 10.0)
    assert outside.server is None  # external stays external


@pytest.mark.parametrize(("specs", "needle"), [
    (["a=http://h:1"], "mode b (embedded) has no --endpoint"),
    (["a@128=http://h:1", "b=http://h:1"], "mode a (embedded) has no --endpoint for "
                                            "capacity 256"),
    (["zz=http://h:1"], "no such mode in two (modes: a, b, ext)"),
    (["ext=http://h:1"], "mode ext is external"),
    (["b@256=http://h:1"], "not measured at capacity 256 (capacities: 128)"),
    (["a"], "expected MODE=URL or MODE@CAPACITY=URL"),
    (["a=ftp://h"], "is not an http(s) URL"),
    (["a=http://h:1", "a=http://h:2"], "given twice"),
])
def test_bad_plans_are_named(specs, needle) -> None:
    with pytest.raises(ConfigError) as info:
        attach_plan(PARSED, specs)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_urls_in_the_manifest_lose_credentials() -> None:
    assert redact_url("http://user:secret@h:8080/v1?key=k") == "http://h:8080/v1"
    assert parse_endpoint_specs(["a@128=http://h:1"]) == {("a", 128): "http://h:1"}


def test_nothing_listening_is_one_line_with_what_to_do(tmp_path) -> None:
    with refusing_url() as url, pytest.raises(EndpointUnreachable) as info:
        server = AttachedServer(url, "a", 128, tmp_path / "run")
        server.start(tmp_path / "log", ready_timeout_s=1)
    message = str(info.value)
    assert message.startswith("a @ 128: nothing answers http://127.0.0.1:")
    assert f"kvlab run --resume {tmp_path / 'run'}" in message and "\n" not in message
    server.stop()  # owns nothing: a no-op


def test_context_size_of_props() -> None:
    assert accepted_context_sizes(1000) == {1000, 1024}  # llama.cpp pads n_ctx to 256
    assert accepted_context_sizes(512) == {512}
    assert context_size({"default_generation_settings": {"n_ctx": 512}}) == 512
    assert context_size({}) is None and context_size(None) is None
