"""Endpoint settings from the command line, the experiment file, the environment and .env.

Precedence, field by field: command line > experiment file > environment > ``.env``.
An empty variable counts as unset. ``.env`` is read with python-dotenv into a dict;
``os.environ`` is never modified.

Variables (environment or ``.env``), one endpoint per group:

==========================  ==========================================================
``VLLM_BASE_URL``           the vLLM endpoint of the seed notebook, e.g.
``VLLM_MODEL_ID``           ``http://host:5002/v1`` (a trailing ``/v1`` is fine)
``VLLM_API_KEY``            optional (a local server may need none)
``VLLM_ENDPOINT_NAME``      optional; default ``vllm``
``OPENAI_BASE_URL_<n>``     numbered OpenAI-compatible slots, n = 1, 2, ...
``OPENAI_MODEL_<n>``        model id (also read: ``OPENAI_CHAT_MODEL_ID_<n>``)
``OPENAI_API_KEY_<n>``      optional
``OPENAI_NAME_<n>``         optional; default ``openai-<n>`` (also read:
                            ``OPENAI_ENDPOINT_NAME_<n>``)
==========================  ==========================================================

Slot 1 also answers to the unsuffixed names (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``OPENAI_CHAT_MODEL_ID``, ``OPENAI_ENDPOINT_NAME``), as in the seed notebook. These
endpoints use the OpenAI chat API unless the experiment or command line says otherwise.

A group with a base URL or a model set must have both: otherwise
:class:`~kvlab.errors.ConfigError` names the missing variable (a key alone is ignored).
The experiment file and the command line give endpoints as mappings with ``name``,
``base_url``, ``model``, ``api``, ``timeout_s`` and ``api_key_env`` (the *name* of a
variable holding the key: keys never go into experiment files or command lines, which
end up in manifests and shell history).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from kvlab.api.dialects import dialect_of
from kvlab.bench.client.endpoints import Endpoint
from kvlab.errors import ConfigError
from kvlab.rundir import ApiKind

MAX_SLOTS = 32  # numbered OPENAI_* slots looked at
FIELDS = ("base_url", "model", "api_key", "name")
ENTRY_KEYS = {"name", "base_url", "model", "api", "timeout_s", "api_key_env"}


def _slot_names(index: int) -> dict[str, tuple[str, ...]]:
    """Variable names per field for OPENAI slot ``index`` (first name is canonical)."""
    s = f"_{index}"
    names = {
        "base_url": (f"OPENAI_BASE_URL{s}",),
        "model": (f"OPENAI_MODEL{s}", f"OPENAI_CHAT_MODEL_ID{s}"),
        "api_key": (f"OPENAI_API_KEY{s}",),
        "name": (f"OPENAI_NAME{s}", f"OPENAI_ENDPOINT_NAME{s}"),
    }
    if index == 1:
        unsuffixed = {
            "base_url": "OPENAI_BASE_URL",
            "model": "OPENAI_CHAT_MODEL_ID",
            "api_key": "OPENAI_API_KEY",
            "name": "OPENAI_ENDPOINT_NAME",
        }
        names = {k: (*v, unsuffixed[k]) for k, v in names.items()}
    return names


VLLM_NAMES: dict[str, tuple[str, ...]] = {
    "base_url": ("VLLM_BASE_URL",),
    "model": ("VLLM_MODEL_ID",),
    "api_key": ("VLLM_API_KEY",),
    "name": ("VLLM_ENDPOINT_NAME",),
}


def find_env_file(start: Path | None = None) -> Path | None:
    """The first ``.env`` in ``start`` (default: the current directory) or its parents."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / ".env"
        if candidate.is_file():
            return candidate
    return None


def read_variables(
    environ: Mapping[str, str] | None = None,
    env_file: Path | str | None = None,
    search_env_file: bool = True,
) -> dict[str, str]:
    """Environment over ``.env``, empty values dropped. ``os.environ`` is left alone.

    ``env_file`` must exist when given; otherwise the nearest ``.env`` is used when
    ``search_env_file`` is true.
    """
    path: Path | None
    if env_file is not None:
        path = Path(env_file)
        if not path.is_file():
            raise ConfigError(f"env file {path} does not exist; check --env-file")
    else:
        path = find_env_file() if search_env_file else None
    merged: dict[str, str] = {}
    if path is not None:
        merged.update({k: v for k, v in dotenv_values(path).items() if v})
    env = os.environ if environ is None else environ
    merged.update({k: v for k, v in env.items() if v})
    return merged


def _group(
    variables: Mapping[str, str], names: dict[str, tuple[str, ...]], default_name: str
) -> dict[str, Any] | None:
    """One endpoint's fields from its variable group; None when none is set."""
    fields: dict[str, Any] = {}
    for key, candidates in names.items():
        for var in candidates:
            if var in variables:
                fields[key] = variables[var]
                break
    if "base_url" not in fields and "model" not in fields:
        return None  # nothing, or only a key (a shell-wide OPENAI_API_KEY is common)
    for key in ("base_url", "model"):
        if key not in fields:
            given = ", ".join(sorted(v for c in names.values() for v in c if v in variables))
            raise ConfigError(
                f"partial endpoint settings: {names[key][0]} is not set but {given} is; "
                f"set {names[key][0]} (environment or .env) or remove the others"
            )
    fields.setdefault("name", default_name)
    fields["api"] = ApiKind.OPENAI_CHAT
    fields["origin"] = "environment/.env"
    return fields


def endpoints_from_variables(variables: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Endpoint fields by name from VLLM_* and OPENAI_*_<n> variables."""
    found: dict[str, dict[str, Any]] = {}
    groups = [(VLLM_NAMES, "vllm")]
    groups += [(_slot_names(i), f"openai-{i}") for i in range(1, MAX_SLOTS + 1)]
    for names, default_name in groups:
        fields = _group(variables, names, default_name)
        if fields is None:
            continue
        if fields["name"] in found:
            raise ConfigError(
                f"two endpoint groups are both named {fields['name']!r}; give each a "
                "distinct *_NAME / VLLM_ENDPOINT_NAME"
            )
        found[fields["name"]] = fields
    return found


def _apply(
    found: dict[str, dict[str, Any]],
    entry: Mapping[str, Any],
    variables: Mapping[str, str],
    origin: str,
) -> None:
    """Overlay one experiment/CLI entry on the endpoint of the same name."""
    if "api_key" in entry:
        raise ConfigError(
            f"{origin}: do not write API keys here; put the key in the environment or "
            ".env and name its variable with api_key_env"
        )
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise ConfigError(
            f"{origin}: unknown endpoint keys {sorted(unknown)}; use {sorted(ENTRY_KEYS)}"
        )
    name = str(entry.get("name") or "default")
    fields = found.setdefault(name, {"name": name, "api": ApiKind.OPENAI_CHAT})
    for key in ("base_url", "model", "timeout_s"):
        if entry.get(key) is not None:
            fields[key] = entry[key]
    if entry.get("api") is not None:
        try:
            fields["api"] = ApiKind(entry["api"])
        except ValueError as exc:
            kinds = ", ".join(k.value for k in ApiKind)
            raise ConfigError(f"{origin}: api {entry['api']!r} is not one of {kinds}") from exc
    if entry.get("api_key_env"):
        var = str(entry["api_key_env"])
        if var not in variables:
            raise ConfigError(f"{origin}: api_key_env names {var}, which is not set")
        fields["api_key"] = variables[var]
    fields["origin"] = origin


def load_endpoints(
    *,
    cli: Mapping[str, Any] | None = None,
    experiment: Iterable[Mapping[str, Any]] = (),
    environ: Mapping[str, str] | None = None,
    env_file: Path | str | None = None,
    search_env_file: bool = True,
) -> list[Endpoint]:
    """Every configured endpoint, settings merged by precedence, validated once.

    ``environ`` defaults to ``os.environ``; ``env_file`` to the nearest ``.env``.
    """
    variables = read_variables(environ, env_file, search_env_file)
    found = endpoints_from_variables(variables)
    for entry in experiment:
        _apply(found, entry, variables, "experiment file")
    if cli:
        _apply(found, cli, variables, "command line")
    return [_build(fields) for fields in found.values()]


def _build(fields: dict[str, Any]) -> Endpoint:
    name, api = fields["name"], fields["api"]
    origin = fields.get("origin", "settings")
    if not fields.get("base_url"):
        raise ConfigError(f"endpoint {name!r} ({origin}) has no base_url; set it")
    if dialect_of(api).needs_model and not fields.get("model"):
        raise ConfigError(f"endpoint {name!r} ({origin}) has no model id; the {api} API needs one")
    try:
        timeout = float(fields.get("timeout_s", 120.0))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"endpoint {name!r}: timeout_s must be a number of seconds") from exc
    return Endpoint(
        base_url=str(fields["base_url"]),
        api=api,
        model=fields.get("model"),
        api_key=fields.get("api_key"),
        name=name,
        timeout_s=timeout,
    )


def select_endpoint(endpoints: list[Endpoint], name: str | None) -> Endpoint:
    """The endpoint called ``name``; without a name, the only one configured."""
    names = [e.name for e in endpoints]
    if not endpoints:
        raise ConfigError(
            "no endpoint configured; set VLLM_BASE_URL/VLLM_MODEL_ID or "
            "OPENAI_BASE_URL_1/OPENAI_MODEL_1 (environment or .env)"
        )
    if name is None:
        if len(endpoints) > 1:
            raise ConfigError(f"several endpoints are configured ({names}); name one")
        return endpoints[0]
    for endpoint in endpoints:
        if endpoint.name == name:
            return endpoint
    raise ConfigError(f"no endpoint named {name!r}; configured: {names}")


def describe(endpoint: Endpoint) -> dict[str, Any]:
    """What may be shown of an endpoint: everything but the key (only set / not set)."""
    return {
        "name": endpoint.name,
        "api": endpoint.api.value,
        "base_url": endpoint.base_url,
        "model": endpoint.model,
        "api_key": "set" if endpoint.api_key else "not set",
        "timeout_s": endpoint.timeout_s,
    }
