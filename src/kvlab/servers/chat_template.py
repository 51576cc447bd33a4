"""llama.cpp's fallback chat template, which servers apply to a model without one.

The bundled Gemma 3 270M GGUF is a base model and carries no ``tokenizer.chat_template``.
llama-server then formats chats as ChatML (``common/chat.cpp``, ``CHATML_TEMPLATE_SRC``,
copied verbatim below) and prepends BOS when it tokenizes the prompt. ``kvlab serve``
uses the same template, and a launched vLLM is given :data:`CHATML_WITH_BOS`: vLLM's
chat route adds no special tokens itself, so the template prints BOS. All three servers
then see the same prompt tokens for the same messages.
"""

from __future__ import annotations

LLAMACPP_CHATML = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}"
)

CHATML_WITH_BOS = "{{- bos_token -}}\n" + LLAMACPP_CHATML
