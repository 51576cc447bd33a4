"""Generation fields: JSON numbers read as JSON Schema reads them, booleans strict."""

from __future__ import annotations

import httpx
import pytest

from kvlab.serve.api_errors import ApiError
from kvlab.serve.params import as_int, parse_gen_params


@pytest.mark.parametrize(("value", "expected"), [
    (3, 3), (3.0, 3), (-1.0, -1), (2.5, None), (True, None), ("3", None), (None, None),
])
def test_as_int_takes_integral_numbers_only(value: object, expected: int | None) -> None:
    assert as_int(value) == expected


def test_integral_floats_are_integers() -> None:
    params = parse_gen_params({"n_predict": 3.0, "seed": 7.0}, 42)
    assert (params.n_predict, params.seed) == (3, 7)
    assert isinstance(params.n_predict, int)


@pytest.mark.parametrize("value", [{}, 1, "yes", []])
def test_include_usage_must_be_a_boolean(value: object) -> None:
    with pytest.raises(ApiError, match="include_usage"):
        parse_gen_params({"stream_options": {"include_usage": value}}, 42)


def test_integral_float_token_ids_are_accepted(base_url: str) -> None:
    answer = httpx.post(base_url + "/completion",
                        json={"prompt": [104.0, 105], "n_predict": 2.0, "temperature": 0})
    assert answer.status_code == 200 and answer.json()["tokens_evaluated"] == 2
    text = httpx.post(base_url + "/detokenize", json={"tokens": [104.0, 105]}).json()
    assert text["content"] == "hi"
    refused = httpx.post(base_url + "/detokenize", json={"tokens": [104.5]})
    assert refused.status_code == 400
