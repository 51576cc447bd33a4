from __future__ import annotations

import pytest

from kvlab.engine.gguf_tokenizer import GGUFTokenizer
from kvlab.errors import EngineError

TEXTS = ["Hello world, how are you?", "héllo wörld 日本語 🙂", "  two  spaces\n\nand lines",
         "def f(x):\n\treturn x ** 2"]


@pytest.mark.parametrize("text", TEXTS)
def test_encode_starts_with_bos_and_decodes_back(gemma_tokenizer: GGUFTokenizer,
                                                 text: str) -> None:
    ids = gemma_tokenizer.encode(text)
    assert ids[0] == gemma_tokenizer.bos_id and gemma_tokenizer.bos_id not in ids[1:]
    assert gemma_tokenizer.encode(text, add_bos=False) == ids[1:]
    assert gemma_tokenizer.decode(ids[1:]) == text
    assert len(ids) < len(text.encode("utf-8"))  # real pieces, not bytes


def test_special_tokens_in_the_text_are_parsed(gemma_tokenizer: GGUFTokenizer) -> None:
    ids = gemma_tokenizer.encode("<start_of_turn>user\nHi<end_of_turn>", add_bos=False)
    assert gemma_tokenizer.decode(ids[:1]) == "<start_of_turn>"
    assert gemma_tokenizer.decode(ids[-1:]) == "<end_of_turn>"


def test_streamed_decoding_never_splits_a_character(gemma_tokenizer: GGUFTokenizer) -> None:
    text = "naïve café — 猫が寝ている 🐈‍⬛"
    decoder = gemma_tokenizer.incremental_decoder()
    pieces = [decoder.push(i) for i in gemma_tokenizer.encode(text, add_bos=False)]
    assert "".join(pieces) + decoder.flush() == text
    assert all("\ufffd" not in p for p in pieces)


def test_vocabulary_and_bad_ids(gemma_tokenizer: GGUFTokenizer) -> None:
    assert gemma_tokenizer.vocab_size == 262_144
    assert gemma_tokenizer.decode([gemma_tokenizer.eos_id]) == "<eos>"
    with pytest.raises(EngineError, match=r"0\.\.262143"):
        gemma_tokenizer.decode([262_144])
