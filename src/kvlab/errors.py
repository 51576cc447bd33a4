"""kvlab's exceptions. Every message says what was wrong and what to do.

KvlabError                     base; the CLI prints its message on one line, exit 2
├── ConfigError                bad user input: preset, file, flag, experiment, .env
│   ├── ExperimentError        an experiment file that does not validate
│   └── ModelFileError         a config.json or GGUF file that cannot be read
├── EngineError                the reference engine refused a request
│   ├── PromptTooLongError     the prompt does not fit the model's maximum length
│   └── CacheOverflowError     a write past the end of a preallocated KV cache
├── EndpointError              talking to an inference server failed
│   ├── EndpointUnreachable    connection refused, DNS, TLS
│   ├── EndpointAuthError      401/403, or the configured model is not listed
│   └── EndpointProtocolError  a response that does not follow its API
├── ValidationFailure          rows or pairs refused before aggregation
├── ServerLaunchError          a managed server failed to start or get ready
├── WorkerError                a load worker (kvlab run --workers) could not start, be
│                              placed on a node, or died mid-point
└── RunInterrupted             a run stopped early; records kept, resume hint in message;
                               exit 130 after Ctrl-C
"""

from __future__ import annotations


class KvlabError(Exception):
    """Base class: an error the user can fix; the message says how."""

    exit_status = 2  # the CLI's exit status for it


class ConfigError(KvlabError):
    """Bad user input: unknown preset, invalid value, partial endpoint settings."""


class ExperimentError(ConfigError):
    """An experiment file that does not validate."""


class ModelFileError(ConfigError):
    """A Hugging Face config.json or GGUF file that cannot be read or understood."""


class EngineError(KvlabError):
    """The reference engine refused a request."""


class PromptTooLongError(EngineError):
    """The prompt (plus generation) does not fit the model's maximum length."""


class CacheOverflowError(EngineError):
    """A write past the end of a preallocated KV cache."""


class EndpointError(KvlabError):
    """Talking to an inference server failed."""


class EndpointUnreachable(EndpointError):
    """Connection refused, name resolution or TLS failure."""


class EndpointAuthError(EndpointError):
    """Authentication failed, or the configured model is not served."""


class EndpointProtocolError(EndpointError):
    """A response that does not follow the API it claims."""


class ValidationFailure(KvlabError):
    """Rows or pairs refused before aggregation; the message names them."""


class ServerLaunchError(KvlabError):
    """A managed server exited during start-up or never became ready."""


class WorkerError(KvlabError):
    """A load worker could not start or be placed, or it died (its node was lost)."""


class RunInterrupted(KvlabError):
    """A run stopped early (Ctrl-C, dead server); the records written are kept.

    ``exit_status``: 130 after Ctrl-C (the shell's convention for SIGINT), else 2."""

    def __init__(self, message: str, exit_status: int = 2) -> None:
        super().__init__(message)
        self.exit_status = exit_status
