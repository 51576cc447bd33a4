"""The embedded server's contract, served at ``/openapi.json`` (OpenAPI 3.1).

Written by hand because the routes read raw bodies (llama.cpp's field rules, see
:mod:`kvlab.serve.params`): it states what the handlers accept and answer. Streamed
answers are declared as ``text/event-stream``; each event is ``data: <JSON>``, declared
with the media type's ``itemSchema`` (OpenAPI 3.2's keyword for the items of a stream;
3.1 has none) whose ``data`` names its JSON schema (``contentSchema``). Enforced
limits are declared: the body size and nesting depth (:mod:`kvlab.serve.body`),
``n_predict >= -1``, the seed range, finite numbers only.
Every refusal is a 400 ``Error`` before any generation, including a prompt of the
context size or more (``exceed_context_size_error``: a runtime limit no schema can
state); 401 with a key set; 503 while loading.
"""

from __future__ import annotations

from typing import Any

from kvlab import __version__
from kvlab.serve.body import MAX_BODY_BYTES, MAX_DEPTH

_REF = "#/components/schemas/"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF + name}


_INT = {"type": "integer"}
_GEN_FIELDS: dict[str, Any] = {
    "n_predict": {"type": ["integer", "null"], "minimum": -1,
                  "description": "tokens to generate; -1 = until the context is full"},
    "max_tokens": {"type": ["integer", "null"], "minimum": -1},
    "max_completion_tokens": {"type": ["integer", "null"], "minimum": -1},
    "temperature": {"type": ["number", "null"],
                    "description": "default 0.8; below 1e-6 (0 included) greedy; "
                                   "negative values count as 0"},
    "seed": {"type": ["integer", "null"], "minimum": -1, "maximum": 4294967295,
             "description": "-1 or 4294967295: a random seed"},
    "ignore_eos": {"type": ["boolean", "null"]},
    "cache_prompt": {"type": ["boolean", "null"]},
    "stream": {"type": ["boolean", "null"]},
    "stream_options": {"type": ["object", "null"],
                       "properties": {"include_usage": {"type": ["boolean", "null"]}}},
}
_MODEL = {"description": "ignored: the server has one model (llama-server does the same)"}
_TOKEN_ID = {"type": "integer", "minimum": 0}  # "maximum": the vocabulary's last id
_PROMPT = {"oneOf": [{"type": "string", "minLength": 1},
                     {"type": "array", "items": _TOKEN_ID, "minItems": 1}],
           "description": "text, or token ids within the vocabulary"}
_MESSAGE = {"type": "object", "required": ["role"], "properties": {
    "role": {"type": "string"},
    "content": {"oneOf": [{"type": "string"}, {"type": "null"}, {
        "type": "array", "items": {"type": "object", "required": ["type", "text"],
                                   "properties": {"type": {"const": "text"},
                                                  "text": {"type": "string"}}}}]}}}
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["code", "message", "type"],
    "properties": {"code": _INT, "message": {"type": "string"}, "type": {"type": "string"},
                   "param": {"type": "null", "description": "OpenAI routes only"}}}}}
_TIMINGS = {"type": "object", "required": ["prompt_n", "prompt_ms", "predicted_n",
                                           "predicted_ms"]}
_USAGE = {"type": "object", "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
          "properties": {k: _INT for k in ("prompt_tokens", "completion_tokens",
                                           "total_tokens")}}
SCHEMAS: dict[str, Any] = {
    "Error": _ERROR,
    "CompletionRequest": {"type": "object", "required": ["prompt"],
                          "properties": {"prompt": _PROMPT, **_GEN_FIELDS}},
    "OpenAICompletionRequest": {"type": "object", "required": ["prompt"],
                                "properties": {"model": _MODEL, "prompt": _PROMPT,
                                               **_GEN_FIELDS}},
    "ChatRequest": {"type": "object", "required": ["messages"], "properties": {
        "model": _MODEL,
        "messages": {"type": "array", "items": _MESSAGE, "minItems": 1}, **_GEN_FIELDS}},
    "Completion": {"type": "object", "required": [
        "content", "tokens", "stop", "tokens_predicted", "tokens_evaluated", "stop_type",
        "truncated", "timings"], "properties": {
        "content": {"type": "string"}, "tokens": {"type": "array", "items": _INT},
        "stop": {"const": True}, "tokens_predicted": _INT, "tokens_evaluated": _INT,
        "stop_type": {"enum": ["eos", "limit"]}, "truncated": {"type": "boolean"},
        "timings": _TIMINGS}},
    "CompletionEvent": {"type": "object", "required": ["content", "stop"], "description":
                        "one per sampled token (stop false), then the final Completion "
                        "(stop true); no [DONE]",
                        "properties": {"content": {"type": "string"},
                                       "stop": {"type": "boolean"}}},
    "OpenAICompletion": {"type": "object", "required": ["id", "object", "choices", "usage"],
                         "properties": {"id": {"type": "string", "pattern": "^cmpl-"},
                                        "object": {"const": "text_completion"},
                                        "choices": {"type": "array"}, "usage": _USAGE}},
    "ChatCompletion": {"type": "object", "required": ["id", "object", "choices", "usage"],
                       "properties": {"id": {"type": "string", "pattern": "^chatcmpl-"},
                                      "object": {"const": "chat.completion"},
                                      "choices": {"type": "array"}, "usage": _USAGE}},
    "OpenAIEvent": {"description": "a chunk (object chat.completion.chunk or "
                    "text_completion); the stream ends with data: [DONE]",
                    "type": "object", "required": ["id", "object", "choices"]},
    "ResponsesRequest": {"type": "object", "required": ["input"], "properties": {
        "model": _MODEL, "instructions": {"type": ["string", "null"]},
        "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": _MESSAGE}]},
        "max_output_tokens": {"type": ["integer", "null"], "minimum": -1},
        "previous_response_id": {"type": ["string", "null"]},
        "store": {"type": ["boolean", "null"]}, **_GEN_FIELDS}},
    "Response": {"type": "object", "required": ["id", "object", "status", "output", "usage"],
                 "properties": {"id": {"type": "string", "pattern": "^resp_"},
                                "object": {"const": "response"},
                                "status": {"enum": ["completed", "incomplete"]},
                                "output": {"type": "array"}, "usage": {"type": "object"}}},
    "ResponsesEvent": {"description": "typed events (event: <type>); the last is "
                       "response.completed", "type": "object", "required": ["type"]},
    "MessagesRequest": {"type": "object", "required": ["messages", "max_tokens"],
                        "properties": {
        "model": _MODEL, "system": {"oneOf": [{"type": "string"}, {"type": "array"}]},
        "messages": {"type": "array", "items": _MESSAGE, "minItems": 1},
        **_GEN_FIELDS, "max_tokens": {"type": "integer", "minimum": -1}}},
    "Message": {"type": "object", "required": ["id", "type", "content", "usage"],
                "properties": {"type": {"const": "message"}, "content": {"type": "array"},
                               "usage": {"type": "object", "required": [
                                   "input_tokens", "output_tokens"]}}},
    "MessagesEvent": {"description": "typed events (event: <type>): message_start ... "
                      "message_stop", "type": "object", "required": ["type"]},
    "EmbeddingsRequest": {"type": "object", "required": ["input"], "properties": {
        "model": _MODEL, "input": {"oneOf": [_PROMPT, {"type": "array", "minItems": 1,
                                                      "items": _PROMPT}]},
        "encoding_format": {"const": "float"},
        "dimensions": {"type": ["integer", "null"], "minimum": 1}}},
    "EmbeddingList": {"type": "object", "required": ["object", "data", "usage"],
                      "properties": {"object": {"const": "list"}, "data": {
                          "type": "array", "items": {"type": "object", "required": [
                              "index", "embedding"]}}, "usage": {"type": "object"}}},
}

_BODY_LIMITS = (f"Body at most {MAX_BODY_BYTES} bytes, arrays/objects nested at most "
                f"{MAX_DEPTH} deep, numbers finite (no NaN/Infinity): otherwise 400.")


def _sse_event(name: str) -> dict[str, Any]:
    """One server-sent event whose ``data`` is JSON of schema ``name`` (OpenAPI 3.2's
    ``itemSchema`` for ``text/event-stream``; schemathesis reads it); OpenAI streams end
    with the non-JSON ``data: [DONE]``."""
    data: dict[str, Any] = {"type": "string", "contentMediaType": "application/json",
                            "contentSchema": _ref(name)}
    if name == "OpenAIEvent":
        data = {"type": "string", "anyOf": [{"const": "[DONE]"}, data]}
    return {"type": "object", "required": ["data"], "properties": {
        "data": data, "event": {"type": "string"}}}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _errors(*statuses: int) -> dict[str, Any]:
    words = {400: "bad request (body, field or limit)", 401: "API key missing or wrong",
             404: "unknown route", 503: "model loading"}
    return {str(s): {"description": words[s], "content": _json(_ref("Error"))}
            for s in statuses}


def _generate(op_id: str, summary: str, request: str, whole: str, event: str) -> dict:
    return {"post": {
        "operationId": op_id, "summary": summary, "description": _BODY_LIMITS,
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": _ref(request), "x-max-body-bytes": MAX_BODY_BYTES,
            "x-max-depth": MAX_DEPTH}}},
        "responses": {"200": {"description": "whole answer, or a stream with stream: true",
                              "content": {**_json(_ref(whole)), "text/event-stream": {
                                  "itemSchema": _sse_event(event)}}},
                      **_errors(400, 401, 503)}}}


def _get(op_id: str, summary: str, schema: dict[str, Any]) -> dict:
    return {"get": {"operationId": op_id, "summary": summary,
                    "responses": {"200": {"description": "ok", "content": _json(schema)},
                                  **_errors(401, 503)}}}


def _simple_post(op_id: str, summary: str, request: dict, answer: dict) -> dict:
    return {"post": {"operationId": op_id, "summary": summary, "description": _BODY_LIMITS,
                     "requestBody": {"required": True, "content": _json(request)},
                     "responses": {"200": {"description": "ok", "content": _json(answer)},
                                   **_errors(400, 401, 503)}}}


def _paths() -> dict[str, Any]:
    completion = ("CompletionRequest", "Completion", "CompletionEvent")
    chat = ("ChatRequest", "ChatCompletion", "OpenAIEvent")
    health = {"type": "object", "required": ["status"], "properties": {
        "status": {"const": "ok"}}}
    models = {"type": "object", "required": ["object", "data"],
              "properties": {"data": {"type": "array"}}}
    tokens = {"type": "array", "items": {"oneOf": [_INT, {"type": "object"}]}}
    return {
        "/health": _get("health", "200 once loaded", health),
        "/v1/health": _get("health_v1", "alias of /health", health),
        "/props": _get("props", "server and slot settings", {"type": "object"}),
        "/metrics": {"get": {
            "operationId": "metrics",
            "summary": "load gauges and counters, Prometheus text (vLLM's names, kvlab: "
                       "prefix)",
            "responses": {"200": {"description": "ok", "content": {
                "text/plain": {"schema": {"type": "string"}}}}, **_errors(401, 503)}}},
        "/tokenize": _simple_post(
            "tokenize", "text -> token ids: llama.cpp's body {content}, or vLLM's {prompt} "
            "(content wins when both are given)",
            {"type": "object", "anyOf": [{"required": ["content"]}, {"required": ["prompt"]}],
             "properties": {
                "content": {"type": "string"}, "prompt": {"type": "string"}, "model": _MODEL,
                "with_pieces": {"type": ["boolean", "null"]},
                "add_special": {"type": ["boolean", "null"],
                                "description": "content: prepend BOS (default false, as "
                                               "llama.cpp)"},
                "add_special_tokens": {"type": ["boolean", "null"],
                                       "description": "prompt: prepend BOS (default true, "
                                                      "as vLLM)"},
                "return_token_strs": {"type": ["boolean", "null"]}}},
            {"anyOf": [
                {"type": "object", "required": ["tokens"], "properties": {"tokens": tokens}},
                {"type": "object", "required": ["count", "max_model_len", "tokens"],
                 "properties": {"count": _INT, "max_model_len": _INT,
                                "tokens": {"type": "array", "items": _INT},
                                "token_strs": {"type": ["array", "null"]}}}]}),
        "/detokenize": _simple_post(
            "detokenize", "token ids -> text (llama.cpp's key content, vLLM's prompt)",
            {"type": "object", "required": ["tokens"], "properties": {
                "model": _MODEL, "tokens": {"type": "array", "items": _TOKEN_ID}}},
            {"type": "object", "required": ["content", "prompt"],
             "properties": {"content": {"type": "string"}, "prompt": {"type": "string"}}}),
        "/apply-template": _simple_post(
            "apply_template", "messages -> the chat prompt text (BOS is added when tokenized)",
            {"type": "object", "required": ["messages"], "properties": {
                "messages": {"type": "array", "items": _MESSAGE, "minItems": 1}}},
            {"type": "object", "required": ["prompt"],
             "properties": {"prompt": {"type": "string"}}}),
        "/completion": _generate("completion", "llama.cpp completion", *completion),
        "/completions": _generate("completions", "alias of /completion", *completion),
        "/v1/models": _get("models", "the served model", models),
        "/models": _get("models_alias", "alias of /v1/models", models),
        "/v1/completions": _generate("openai_completions", "OpenAI text completion",
                                     "OpenAICompletionRequest", "OpenAICompletion",
                                     "OpenAIEvent"),
        "/v1/chat/completions": _generate("chat_completions", "OpenAI chat", *chat),
        "/v1/responses": _generate("responses", "OpenAI Responses", "ResponsesRequest",
                                   "Response", "ResponsesEvent"),
        "/v1/messages": _generate("messages", "Anthropic Messages", "MessagesRequest",
                                  "Message", "MessagesEvent"),
        "/v1/messages/count_tokens": _simple_post(
            "count_tokens", "a Messages request's prompt tokens, template included",
            {"type": "object", "required": ["messages"], "properties": {
                "model": _MODEL, "messages": {"type": "array", "items": _MESSAGE,
                                              "minItems": 1}}},
            {"type": "object", "required": ["input_tokens"],
             "properties": {"input_tokens": _INT}}),
        "/v1/embeddings": _simple_post(
            "embeddings", "one mean-pooled, unit-length vector per input",
            _ref("EmbeddingsRequest"), _ref("EmbeddingList")),
        "/chat/completions": _generate("chat_completions_alias", "alias", *chat),
    }


def openapi_document(vocab_size: int) -> dict[str, Any]:
    """The whole ``/openapi.json`` document of a server whose vocabulary has
    ``vocab_size`` tokens (token ids are declared within it)."""
    import json

    text = json.dumps({"openapi": "3.1.0",
                       "info": {"title": "kvlab serve", "version": __version__,
                                "description": "The reference engine behind llama.cpp's and "
                                               "OpenAI's HTTP APIs. " + _BODY_LIMITS},
                       "paths": _paths(), "components": {"schemas": SCHEMAS}})
    token_id = json.dumps(_TOKEN_ID)
    bounded = json.dumps({**_TOKEN_ID, "maximum": vocab_size - 1})
    return json.loads(text.replace(token_id, bounded))  # a fresh copy, ids bounded
