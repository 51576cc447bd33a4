"""What ``kvlab serve`` serves: a toy preset or a real model from a GGUF.

:func:`resolve_source` is quick (a preset lookup, or a GGUF's hash and header): it
fixes the model id, the shape (vocabulary, ``max_len``) and the chat template before
the server listens, so bad input is one line (unknown model, corrupt file).
:meth:`ModelSource.load` does the slow part on the loading thread: a toy built from
its seed, or :func:`kvlab.engine.models.load_model` (Gemma 3 270M: about 20 s).

Tokenization follows llama-server: a text prompt of ``/completion`` (and a chat
prompt) starts with BOS when the model has one; ``/tokenize`` adds it only with
``add_special``; special-token text (``<start_of_turn>``) is parsed in both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvlab.serve.chat import TOY_TEMPLATE, ChatTemplate
from kvlab.servers.chat_template import LLAMACPP_CHATML

if TYPE_CHECKING:  # torch is imported when a model loads, not before
    from kvlab.engine.lm import LanguageModel

# llama.cpp's llama_vocab_type, by the GGUF's tokenizer.ggml.model (what /v1/models says)
VOCAB_TYPES = {"no_vocab": 0, "llama": 1, "gpt2": 2, "bert": 3, "t5": 4, "rwkv": 5,
               "plamo2": 6}


class ServedTokenizer:
    """The model's tokenizer with llama-server's BOS rule; ``bos_id`` None: no BOS."""

    def __init__(self, inner: Any, bos_id: int | None, eos_id: int) -> None:
        self.inner = inner
        self.vocab_size: int = inner.vocab_size
        self.bos_id = bos_id
        self.bos_text = inner.decode([bos_id]) if bos_id is not None else ""
        self.eos_text = inner.decode([eos_id])

    def encode(self, text: str, add_special: bool = True) -> list[int]:
        """Token ids of ``text``; with ``add_special``, BOS first (when there is one)."""
        if self.bos_id is None:
            return list(self.inner.encode(text))
        return list(self.inner.encode(text, add_bos=add_special))

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``, special tokens as their text."""
        return str(self.inner.decode(list(ids)))

    def incremental_decoder(self) -> Any:
        """A fresh streaming decoder (``push(id) -> str``, ``flush() -> str``)."""
        return self.inner.incremental_decoder()


@dataclass
class Served:
    """A loaded model: the engine module, its tokenizer and its chat template."""

    model: LanguageModel
    tokenizer: ServedTokenizer
    chat: ChatTemplate


@dataclass(frozen=True)
class ModelSource:
    """A model to serve, resolved but not loaded.

    ``name``: the model id in responses (the preset, ``gemma-3-270m`` or the path as
    given); ``config``: its shape (``vocab_size``, ``max_len``, ``d_model``,
    ``eos_ids``); ``path``: the GGUF, None for a toy preset.
    """

    name: str
    config: Any
    chat_template: str
    vocab_type: int | str
    path: Path | None = None
    dtype: str = "float32"
    weights_seed: int = 42

    def load(self) -> Served:
        """Build or read the model (blocking; seconds to tens of seconds)."""
        model: LanguageModel
        if self.path is None:
            from kvlab.engine import ByteTokenizer, build_model

            model = build_model(self.config, seed=self.weights_seed)
            tokenizer = ServedTokenizer(ByteTokenizer(), None, self.config.eos_ids[0])
        else:
            from kvlab.engine.models import load_model
            from kvlab.servers.fetch import model_file

            loaded = load_model(model_file(self.name), self.dtype, self.name)
            model = loaded.model
            tokenizer = ServedTokenizer(loaded.tokenizer, loaded.tokenizer.bos_id,
                                        loaded.tokenizer.eos_id)
        chat = ChatTemplate(self.chat_template, tokenizer.bos_text, tokenizer.eos_text)
        chat.warm()
        return Served(model, tokenizer, chat)


def resolve_source(preset: str = "toy", model: str | None = None, dtype: str = "float32",
                   weights_seed: int = 42) -> ModelSource:
    """The toy ``preset``, or ``model`` (``gemma-3-270m`` or a GGUF path) when given.

    ConfigError for an unknown preset or model (naming the choices); ModelFileError
    naming the file for a GGUF that cannot be read or is not a supported architecture.
    """
    if model is None:
        from kvlab.engine import get_preset

        return ModelSource(name=preset, config=get_preset(preset),
                           chat_template=TOY_TEMPLATE, vocab_type="byte",
                           weights_seed=weights_seed)
    from kvlab.engine.gemma_config import gemma_config_from_metadata
    from kvlab.engine.weights import weight_format
    from kvlab.memory.gguf_file import read_gguf_metadata
    from kvlab.servers.fetch import model_file

    weight_format(dtype)  # refuse an unknown format now
    path = model_file(model).path
    meta = read_gguf_metadata(path)
    config = gemma_config_from_metadata(meta, f"GGUF file {str(path)!r}")
    template = meta.get("tokenizer.chat_template")
    return ModelSource(
        name=model, config=config,
        chat_template=template if isinstance(template, str) and template else LLAMACPP_CHATML,
        vocab_type=VOCAB_TYPES.get(str(meta.get("tokenizer.ggml.model")), 0),
        path=path, dtype=dtype, weights_seed=weights_seed)
