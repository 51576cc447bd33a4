"""/openapi.json: served, true to behaviour (fuzzed by schemathesis), limits declared."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from kvlab.serve.body import MAX_BODY_BYTES, MAX_DEPTH

# every check but positive_data_acceptance: a schema-valid prompt longer than the context
# is refused (400 exceed_context_size_error), a runtime limit no schema can state
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,"
          "response_schema_conformance,response_headers_conformance,unsupported_method,"
          "negative_data_rejection")


def test_contract_declares_streams_and_limits(base_url: str) -> None:
    document = httpx.get(base_url + "/openapi.json").json()
    completion = document["paths"]["/completion"]["post"]
    stream = completion["responses"]["200"]["content"]["text/event-stream"]
    data = stream["itemSchema"]["properties"]["data"]
    assert data["contentSchema"] == {"$ref": "#/components/schemas/CompletionEvent"}
    body = completion["requestBody"]["content"]["application/json"]
    assert (body["x-max-body-bytes"], body["x-max-depth"]) == (MAX_BODY_BYTES, MAX_DEPTH)
    assert set(completion["responses"]) == {"200", "400", "401", "503"}
    chat = document["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]
    assert "[DONE]" in str(chat["text/event-stream"]["itemSchema"])


@pytest.mark.slow
def test_schemathesis_finds_no_5xx_and_no_schema_violation(base_url: str,
                                                           tmp_path: Path) -> None:
    """Bounded fuzzing (15 examples per operation, ~30 s on 2 cores): coverage and
    fuzzing phases, no server error, every status, content type, header and body
    (SSE events included) as declared, 405 for undeclared methods, and every request
    the schema forbids refused."""
    binary = Path(sys.executable).with_name("schemathesis")
    if not binary.exists():
        binary = Path(shutil.which("schemathesis") or "schemathesis")
    result = subprocess.run(
        [str(binary), "run", base_url + "/openapi.json", "--max-examples", "15",
         "--checks", CHECKS, "--seed", "42", "--no-color", "--max-response-time", "60"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)  # its cache stays there
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-1000:]
    assert " passed" in result.stdout and "failures" not in result.stdout.split("SUMMARY")[-1]
