"""Chat messages -> one prompt, through the model's Jinja chat template.

The template is rendered by Transformers (``render_jinja_template``: the sandboxed
Jinja environment ``apply_chat_template`` uses), never by kvlab's own string code.
Which template:

- a GGUF's ``tokenizer.chat_template`` when the file has one;
- otherwise llama.cpp's fallback, :data:`~kvlab.servers.chat_template.LLAMACPP_CHATML`
  (llama.cpp's ``CHATML_TEMPLATE_SRC``): the bundled Gemma 3 270M carries no template,
  so llama-server formats its chats as ChatML and so do kvlab and a launched vLLM;
- the toy: :data:`TOY_TEMPLATE`, ``"<role>: <content>\\n"`` per message, then
  ``"assistant: "``.

Messages are checked first (OpenAI's shape: ``role`` a string, ``content`` a string,
null or an array of text parts). Text parts are joined with ``"\\n"``, as llama-server
joins them for a template that takes string content.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from kvlab.serve.api_errors import ApiError, invalid_request

TOY_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- message.role + ': ' + message.content + '\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- 'assistant: ' -}}{%- endif -%}"
)


@dataclass(frozen=True)
class ChatTemplate:
    """A Jinja chat template and the special-token texts it may print.

    ``bos_token``: the BOS text ("" for the toy). A rendered prompt that starts with it
    loses it, because the prompt's tokenization adds BOS itself (llama.cpp does both).
    """

    source: str
    bos_token: str = ""
    eos_token: str = ""

    def warm(self) -> None:
        """Import the renderer and compile the template (cached by Transformers) now, at
        loading time, so the first chat request does not pay for either."""
        # A template may refuse this chat (400 later, per request); compiling is the point.
        with contextlib.suppress(ApiError):
            self.render({"messages": [{"role": "user", "content": "Hi"}]})

    def render(self, body: dict[str, Any]) -> str:
        """The prompt text of a chat request's ``messages`` (400 if they are malformed)."""
        import jinja2
        from transformers.utils.chat_template_utils import render_jinja_template

        messages = check_messages(body.get("messages"))
        try:
            # (rendered prompts, generation indices), whatever its annotation says
            result: Any = render_jinja_template(
                conversations=[messages], chat_template=self.source,
                add_generation_prompt=True, bos_token=self.bos_token,
                eos_token=self.eos_token)
            rendered, _ = result
        except (jinja2.TemplateError, TypeError, ValueError) as exc:  # raise_exception()
            raise invalid_request(f"'messages': the chat template refused them: {exc}"
                                  ) from None
        prompt: str = rendered[0]
        if self.bos_token and prompt.startswith(self.bos_token):
            prompt = prompt[len(self.bos_token):]
        return prompt


def check_messages(messages: Any) -> list[dict[str, str]]:
    """OpenAI ``messages`` as ``[{role, content}]`` with string content (400 if not)."""
    if not isinstance(messages, list) or not messages:
        raise invalid_request("'messages' is required and must be a non-empty array")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise invalid_request(f"messages[{i}] must be an object with a string 'role'")
        out.append({"role": message["role"],
                    "content": _message_text(message.get("content"), i)})
    return out


def _message_text(content: Any, i: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text"
                    and isinstance(part.get("text"), str)):
                raise invalid_request(f"messages[{i}].content: only text parts are supported")
            texts.append(part["text"])
        return "\n".join(texts)
    raise invalid_request(f"messages[{i}].content must be a string or an array of text parts")
