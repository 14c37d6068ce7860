"""The dual path: render the chat template client-side and send the prompt to /v1/completions.

If the chat path regresses while the raw-completion path, fed the same conversation, does not, the
regression lives in the chat frontend (template application, reasoning/tool parsers, detokenizer
glue), not in the weights. Rendering follows Hugging Face's conventions (trim_blocks, lstrip_blocks,
`raise_exception`, `strftime_now`, a `tojson` that keeps non-ASCII) in a jinja2 sandbox.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Chat-only fields that have no meaning for a raw completion.
CHAT_ONLY = ("messages", "tools", "tool_choice", "response_format", "logprobs", "top_logprobs",
             "parallel_tool_calls", "stream_options", "chat_template_kwargs")


class TemplateUnavailable(ValueError):
    pass


def _raise(message: str) -> None:
    raise TemplateError(message)


def _env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False, **_: json.dumps(x, indent=indent, ensure_ascii=ensure_ascii)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: dt.datetime.now().strftime(fmt)
    return env


def render(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **kwargs: Any) -> str:
    """The prompt the chat template makes of this conversation, with the generation prompt appended.

    `bos_token` renders empty: llama-server (like vLLM's /v1/completions) adds BOS when it tokenizes a
    prompt, and a second one would shift every position (the double-BOS bug).
    """
    try:
        return _env().from_string(template).render(
            messages=messages, tools=tools or None, add_generation_prompt=True, bos_token="", eos_token="", **kwargs
        )
    except TemplateError as e:
        raise TemplateUnavailable(f"chat template failed to render: {e}") from None


def completion_body(chat_body: dict[str, Any], template: str) -> dict[str, Any]:
    body = {k: v for k, v in chat_body.items() if k not in CHAT_ONLY}
    body["prompt"] = render(template, chat_body.get("messages", []), chat_body.get("tools"),
                            **(chat_body.get("chat_template_kwargs") or {}))
    return body
