"""A GGUF model -> a Hugging Face checkpoint folder, with Transformers (a script).

vLLM 0.32 cannot serve a GGUF on CPU (its core has no GGUF loader; the plugin's
dequantization kernels need CUDA), so a launched vLLM serves a checkpoint converted
from the same GGUF the other servers load. This file runs in vLLM's own environment
(:mod:`kvlab.servers.vllm_model` starts it), where Transformers, ``gguf`` and
``accelerate`` are installed; it imports nothing from kvlab.

    python gguf_to_hf.py MODEL.gguf OUT_DIR DTYPE CHAT_TEMPLATE_FILE

Transformers dequantizes the GGUF to dense float32 (about 45 s for Gemma 3 270M, most
of it building the 262k-token vocabulary); the weights are saved in DTYPE.
"""

from __future__ import annotations

import sys
from pathlib import Path


def convert(gguf: Path, out: Path, dtype: str, chat_template: str) -> None:
    """Write the checkpoint of ``gguf`` in ``dtype`` ("bfloat16", "float16",
    "float32") and its tokenizer, with ``chat_template``, into ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF says add_bos_token, but the converted tokenizer does not add BOS ("hi" ->
    # [2202]); Gemma without BOS generates garbage. Turn it on and rebuild the
    # post-processor that inserts it ("hi" -> [2, 2202]).
    tokenizer.add_bos_token = True  # type: ignore[misc]  # typed read-only; settable
    tokenizer.update_post_processor()
    tokenizer.chat_template = chat_template  # the GGUF (a base model) carries none
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                 dtype=torch.float32)
    model = model.to(getattr(torch, dtype))
    # save_pretrained refuses a model "quantized with QuantizationMethod.GGUF"; the
    # weights are dense now, so the quantizer's marks are only in the way.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    check = AutoTokenizer.from_pretrained(out)("hi")["input_ids"]
    if not check or check[0] != tokenizer.bos_token_id:
        raise SystemExit(f"the saved tokenizer does not add BOS: 'hi' -> {check}")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    convert(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3],
            Path(sys.argv[4]).read_text(encoding="utf-8"))
