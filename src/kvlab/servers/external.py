"""An already running server (``server = "external"``): kvlab launches nothing.

Its endpoint (URL, model id, API key) is resolved when the run starts, by
:func:`kvlab.run.targets.endpoint_for`; the key is only ever read from the
environment.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from kvlab.servers.base import Address, Server, ServerSettings


class ExternalSettings(ServerSettings):
    """An endpoint name from .env, or explicit settings (``[modes.external]``)."""

    kind: Literal["external"] = "external"
    endpoint: str | None = None  # resolved by kvlab.bench.client.endpoint_config
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None  # the NAME of the variable holding the key

    launched = False
    program = "external server"

    @model_validator(mode="after")
    def _one_source(self) -> ExternalSettings:
        if self.endpoint is None and self.base_url is None:
            raise ValueError("give either endpoint (a name from .env) or base_url")
        if self.endpoint is not None and self.base_url is not None:
            raise ValueError("give endpoint or base_url, not both")
        return self

    def build(self, capacity: int) -> Server | None:
        """Nothing to launch: the requests go to the endpoint."""
        return None

    def address(self) -> Address:
        """The endpoint name or URL, the model id and the key's variable, as given."""
        return Address(self.endpoint, self.base_url, self.model, self.api_key_env)
