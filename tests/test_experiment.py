"""Experiment files: defaults, and one-line errors naming file and key path."""

from __future__ import annotations

import pytest

from kvlab.errors import ExperimentError
from kvlab.experiment import load_experiment, parse_experiment
from kvlab.run.planner import mode_plan
from kvlab.run.runplan import request_salt
from kvlab.servers.embedded import EmbeddedSettings
from kvlab.servers.llamacpp import LlamaCppSettings

MINIMAL = 'name = "x"\n[[modes]]\nname = "a"\n'


def error_of(text: str) -> str:
    with pytest.raises(ExperimentError) as info:
        parse_experiment(text, "experiments/x.toml")
    message = str(info.value)
    assert "\n" not in message
    return message


def test_defaults_follow_the_protocol() -> None:
    e = parse_experiment(MINIMAL)
    assert e.workload.output_tokens == 64 and e.workload.warmup == 1
    assert e.workload.repetitions == 1
    p = e.protocol
    assert (p.temperature, p.seed, p.ignore_eos, p.cache_prompt) == (0.0, 42, True, False)
    assert (p.request_timeout_s, p.ready_timeout_s) == (120.0, 180.0)
    mode = e.modes[0]
    assert mode.server == "embedded" and isinstance(mode.settings, EmbeddedSettings)
    assert mode_plan(e, mode).request_params()["seed"] == 42


def test_mode_body_wins_over_protocol() -> None:
    e = parse_experiment(MINIMAL + '[modes.body]\ntemperature = 0.5\n'
                         'chat_template_kwargs = {enable_thinking = false}\n')
    params = mode_plan(e, e.modes[0]).request_params()
    assert params["temperature"] == 0.5
    assert params["chat_template_kwargs"] == {"enable_thinking": False}


def test_cache_salt_is_per_request_and_off_by_default() -> None:
    off = parse_experiment(MINIMAL)
    assert "cache_salt" not in mode_plan(off, off.modes[0]).request_params(
        request_salt("run", 3))
    on = parse_experiment(MINIMAL + '[protocol]\ncache_salt = true\n')
    salts = {mode_plan(on, on.modes[0]).request_params(request_salt("run-1", i))["cache_salt"]
             for i in range(50)}
    assert len(salts) == 50  # one per request position
    assert request_salt("run-1", 7) == request_salt("run-1", 7) != request_salt("run-2", 7)
    salt = request_salt("run-1", 7)  # vLLM's rule: <= 128 characters, none of @ / \
    assert len(salt) == 32 and not set(salt) & set("@/\\\0")
    assert "cache_salt" not in mode_plan(on, on.modes[0]).request_params()  # sizing: no salt


def test_bad_api_names_the_choices() -> None:
    text = MINIMAL + '[[modes]]\nname = "b"\napi = "openai"\n'
    assert error_of(text) == (
        "experiments/x.toml: modes[1].api: 'openai' is not one of "
        "llamacpp-completion, openai-chat, openai-completion, openai-responses, "
        "anthropic-messages, openai-embeddings"
    )


def test_unknown_key() -> None:
    message = error_of('name = "x"\nfoo = 1\n' + MINIMAL[11:])
    assert message == "experiments/x.toml: foo: unknown key"


def test_unknown_key_never_echoes_a_secret() -> None:
    text = MINIMAL + (
        'server = "external"\n[modes.external]\nbase_url = "http://h"\napi_key = "sk-secret"\n'
    )
    message = error_of(text)
    assert "modes[0].external.api_key: unknown key" in message
    assert "sk-secret" not in message


def test_compare_with_a_missing_mode() -> None:
    message = error_of('name = "x"\ncompare = [["a", "c"]]\n' + MINIMAL[11:])
    assert message == "experiments/x.toml: compare[0]: 'c' is not a mode (modes: a)"


def test_bad_values() -> None:
    assert "workload.output_tokens" in error_of(MINIMAL + "[workload]\noutput_tokens = 0\n")
    assert "modes[0].embedded.threads" in error_of(MINIMAL + "[modes.embedded]\nthreads = 0\n")
    assert "not valid TOML" in error_of("name = ")
    assert "settings given but server is 'embedded'" in error_of(
        MINIMAL + '[modes.external]\nbase_url = "http://h"\n')


def test_llamacpp_table_is_validated() -> None:
    e = parse_experiment(MINIMAL.replace('"a"\n', '"a"\nserver = "llamacpp"\n')
                         + "[modes.llamacpp]\nthreads = 2\nslots = 1\n")
    assert isinstance(e.modes[0].settings, LlamaCppSettings)
    assert e.modes[0].settings.threads == 2
    assert "modes[0].llamacpp.split_mode: 'both' is not one of" in error_of(
        MINIMAL.replace('"a"\n', '"a"\nserver = "llamacpp"\n')
        + '[modes.llamacpp]\nsplit_mode = "both"\n')


def test_missing_file(tmp_path) -> None:
    with pytest.raises(ExperimentError, match="cannot read"):
        load_experiment(tmp_path / "nope.toml")


def test_quickstart_validates() -> None:
    e = load_experiment("experiments/quickstart.toml")
    assert [m.name for m in e.modes] == [
        "recompute", "kv-cache", "recompute-openai", "kv-cache-openai"]
    assert e.workload.output_tokens == 64


def test_a_capacity_the_dataset_cannot_fill_is_refused_when_read() -> None:
    text = ('name = "x"\n[workload]\ncapacities = [512, 1024]\n[workload.dataset]\n'
            'kind = "repeated"\ntext = "a "\ntimes = { 512 = 4 }\n[[modes]]\nname = "a"\n')
    with pytest.raises(ExperimentError, match=r"workload\.dataset\.times: no entry for "
                       r"capacity 1024 \(it has 512\)"):
        parse_experiment(text)


def test_arrivals_and_ramp_reach_the_load_points() -> None:
    e = parse_experiment(MINIMAL + '[load]\nkind = "rate"\nvalues = [2, 4]\n'
                         'arrival = "gamma"\nburstiness = 0.5\nramp_up_s = 3\nseed = 9\n')
    first, second = e.load.points(10)
    assert (first.arrival, first.burstiness, first.ramp_up_s, first.seed) == (
        "gamma", 0.5, 3.0, 9)
    assert second.label == "rate=4.0" and second.requests == 10
    again = e.load.probe(4.0, 10, repetition=2)
    assert again.label == "rate=4.0#2" and again.seed == 11  # a repeat draws anew


def test_rounds_send_one_burst_of_n_per_round() -> None:
    e = parse_experiment(MINIMAL + '[load]\nkind = "concurrency"\nvalues = [1, 7]\n'
                         'rounds = 2\n')
    one, seven = e.load.points(10)
    assert (one.requests, seven.requests) == (2, 14)
    assert seven.describe() == "7 users, 14 requests"


@pytest.mark.parametrize(("load", "message"), [
    ('kind = "concurrency"\nvalues = [2]\nrounds = 1\nrequests = 4',
     "load: give one of requests, rounds or duration_s per point, not requests and rounds"),
    ('kind = "rate"\nvalues = [1]\nburstiness = 0.5',
     'load: burstiness shapes gamma arrivals: set arrival = "gamma"'),
    ('kind = "concurrency"\nvalues = [2]\narrival = "gamma"',
     "load.arrival: applies to rate and sessions loads only, not concurrency"),
    ('kind = "rate"', "load.values: a rate load needs values, e.g. [1, 2, 4]"),
    ('kind = "trace"\nvalues = [1.0]', "load: a trace load replays a trace's times; set "
     '[workload.dataset] kind = "trace"'),
    ('kind = "rate"\nvalues = [1]\nramp_up_s = 0', "load.ramp_up_s: Input should be "
     "greater than 0"),
])
def test_bad_load_settings_are_one_line(load: str, message: str) -> None:
    assert error_of(MINIMAL + f"[load]\n{load}\n") == f"experiments/x.toml: {message}"


SEARCH = MINIMAL + '[load]\nkind = "rate"\narrival = "constant"\n[search]\nlow = 1\nhigh = 8\n'


def test_a_search_takes_its_rates_from_the_bisection() -> None:
    e = parse_experiment(SEARCH + "ttft_ms = 200\n")
    assert e.search is not None and e.load.values == []
    assert (e.search.percentile, e.search.repetitions, e.search.precision) == (95.0, 2, 0.05)


@pytest.mark.parametrize(("extra", "message"), [
    ("", "search: give at least one objective: ttft_ms, itl_ms, e2e_ms or goodput"),
    ("goodput = 0.95", "search.goodput: the share of requests meeting [slo]"),
    ("ttft_ms = 100\nlow = 9", "search: low 9 must be below high 8"),
])
def test_bad_search_settings_are_one_line(extra: str, message: str) -> None:
    text = SEARCH.replace("low = 1\n", "" if "low" in extra else "low = 1\n") + extra + "\n"
    assert error_of(text).startswith(f"experiments/x.toml: {message}")


def test_a_search_needs_a_rate_load_without_values() -> None:
    text = SEARCH.replace('arrival = "constant"', "values = [1, 2]") + "ttft_ms = 100\n"
    assert "search: a search picks its own rates" in error_of(text)


def test_an_embeddings_mode_answers_whole_and_only_it_takes_a_batch() -> None:
    streamed = MINIMAL + '[[modes]]\nname = "e"\napi = "openai-embeddings"\n'
    assert error_of(streamed) == ("experiments/x.toml: modes[1]: stream: the "
                                  "openai-embeddings API answers whole; set stream = false")
    batched = MINIMAL + '[[modes]]\nname = "b"\napi = "openai-chat"\nbatch = 4\n'
    assert "batches of inputs are an embeddings API's" in error_of(batched)


def test_a_history_the_server_keeps_needs_responses_and_sessions() -> None:
    messages = MINIMAL + '[[modes]]\nname = "m"\napi = "anthropic-messages"\nhistory = "server"\n'
    assert 'history = "server" needs api = "openai-responses"' in error_of(messages)
    alone = MINIMAL + '[[modes]]\nname = "r"\napi = "openai-responses"\nhistory = "server"\n'
    assert 'needs [load] kind = "sessions"' in error_of(alone)


def test_an_old_spelling_of_the_embedded_kind_reads_with_one_deprecation_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    old = MINIMAL.replace('"a"\n', '"a"\nserver = "kvlab"\n') + "[modes.kvlab]\nthreads = 2\n"
    e = parse_experiment(old, "old.toml")
    assert e.modes[0].server == "embedded"
    assert isinstance(e.modes[0].settings, EmbeddedSettings)
    assert e.modes[0].settings.threads == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["old.toml: server kind 'kvlab' is deprecated; write 'embedded' "
                   '(server = "embedded", [modes.embedded])']
    parse_experiment(MINIMAL, "new.toml")
    assert capsys.readouterr().err == ""
