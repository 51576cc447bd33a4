"""What a (mode, capacity) is measured against: a server kvlab launches, or an endpoint.

``make_server`` builds the managed server of an embedded or llamacpp mode (started and
stopped by the session); ``endpoint_for`` says where the requests go and with which
credentials (API keys come from the environment, never from files).
"""

from __future__ import annotations

import os
from typing import Any

from kvlab.bench.endpoints import Endpoint
from kvlab.errors import ConfigError
from kvlab.experiment import Experiment, Mode


def make_server(experiment: Experiment, mode: Mode, capacity: int) -> Any | None:
    """The managed server of ``mode`` at ``capacity``; None for an external endpoint."""
    if mode.server == "embedded":
        from kvlab.servers.embedded import EmbeddedServer

        settings = mode.embedded
        assert settings is not None
        return EmbeddedServer(capacity, settings.preset, settings.no_cache, settings.threads)
    if mode.server == "llamacpp":
        from kvlab.servers.llamacpp import LlamaServer

        return LlamaServer(mode.llamacpp_settings(), capacity)
    return None


def endpoint_for(experiment: Experiment, mode: Mode, server: Any | None) -> Endpoint:
    """Where this mode's requests go. API keys come from the environment, never files."""
    timeout = experiment.protocol.request_timeout_s
    if server is not None:
        model = mode.embedded.preset if mode.embedded else "default"
        return Endpoint(server.base_url, mode.api, model=model, name=mode.name, timeout_s=timeout)
    external = mode.external
    assert external is not None
    if external.endpoint is not None:
        from kvlab.bench.endpoint_config import load_endpoints, select_endpoint

        resolved = select_endpoint(load_endpoints(), external.endpoint)
        return Endpoint(
            resolved.base_url, mode.api, model=resolved.model, api_key=resolved.api_key,
            name=mode.name, timeout_s=timeout,
        )
    api_key = None
    if external.api_key_env:
        api_key = os.environ.get(external.api_key_env)
        if not api_key:
            raise ConfigError(
                f"mode {mode.name}: environment variable {external.api_key_env} is not set"
            )
    assert external.base_url is not None
    return Endpoint(external.base_url, mode.api, model=external.model, api_key=api_key,
                    name=mode.name, timeout_s=timeout)
