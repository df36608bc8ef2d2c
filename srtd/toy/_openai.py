"""The slice of the OpenAI API the toy speaks: request models and response documents.

Requests are validated leniently (unknown fields such as `temperature` are ignored, as
real engines do) but the fields the toy acts on are checked, so a bad body gets a 400
that names the field instead of a crash.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from srtd.toy._http import HttpError

#: Tokens generated when the request sets no limit; the toy "stops naturally" there.
DEFAULT_COMPLETION_TOKENS = 16
#: An upper bound on `max_tokens`, so one request cannot keep a worker busy for hours.
MAX_TOKENS_LIMIT = 65536

FinishReason = Literal["stop", "length"]
#: The sentinel event that ends an OpenAI stream.
STREAM_DONE = b"data: [DONE]\n\n"
M = TypeVar("M", bound=BaseModel)


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StreamOptions(_Lenient):
    include_usage: bool = False


class _GenerateRequest(_Lenient):
    model: str
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_LIMIT)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1, le=1, description="the toy makes exactly one choice")

    @property
    def token_limit(self) -> int | None:
        return self.max_tokens

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    def budget(self) -> tuple[int, FinishReason]:
        """How many tokens to generate and why generation ends.

        With a limit the toy always talks until the limit ("length"), so benchmarks get
        exactly the output length they ask for; without one it stops "naturally" after
        `DEFAULT_COMPLETION_TOKENS`.
        """
        limit = self.token_limit
        if limit is None:
            return DEFAULT_COMPLETION_TOKENS, "stop"
        return limit, "length"


class CompletionRequest(_GenerateRequest):
    prompt: str | list[str]

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and len(value) != 1:
            raise ValueError("the toy worker takes exactly one prompt per request")
        return value

    @property
    def prompt_text(self) -> str:
        return self.prompt if isinstance(self.prompt, str) else self.prompt[0]


class ContentPart(_Lenient):
    type: str
    text: str | None = None


class ChatMessage(_Lenient):
    role: str
    content: str | list[ContentPart] | None = None

    @property
    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return " ".join(part.text for part in self.content if part.type == "text" and part.text)


class ChatRequest(_GenerateRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_LIMIT)

    @property
    def token_limit(self) -> int | None:
        # The newer name wins, as in the OpenAI API.
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    @property
    def prompt_text(self) -> str:
        return "\n".join(message.text for message in self.messages)


Payload = dict[str, Any]


@dataclass(frozen=True)
class Api:
    """What tells the two generation APIs apart: the request, the names, the shape of a choice.

    Everything else (the header, streaming, usage) is the same, so the worker answers both
    with one function and one of the two rows below.
    """

    request: type[CompletionRequest] | type[ChatRequest]
    id_prefix: str
    object: str
    chunk_object: str
    whole: Callable[[str], Payload]  # a choice's payload with the whole text
    piece: Callable[[str], Payload]  # a streamed chunk's payload with one piece
    opening: Payload | None  # a chunk streamed before the first piece
    closing: Payload  # the last chunk's payload, the one with the finish reason

    def choice(self, payload: Payload, finish_reason: str | None) -> Payload:
        return {"index": 0, **payload, "logprobs": None, "finish_reason": finish_reason}


COMPLETIONS = Api(
    request=CompletionRequest,
    id_prefix="cmpl",
    object="text_completion",
    chunk_object="text_completion",
    whole=lambda text: {"text": text},
    piece=lambda text: {"text": text},
    opening=None,
    closing={"text": ""},
)
CHAT = Api(
    request=ChatRequest,
    id_prefix="chatcmpl",
    object="chat.completion",
    chunk_object="chat.completion.chunk",
    whole=lambda text: {"message": {"role": "assistant", "content": text}},
    piece=lambda text: {"delta": {"content": text}},
    opening={"delta": {"role": "assistant", "content": ""}},
    closing={"delta": {}},
)


def parse(model: type[M], body: Any) -> M:
    """Validate `body` as `model`, or raise a 400 naming the first offending field."""
    if not isinstance(body, dict):
        raise HttpError(400, "request body must be a JSON object")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise HttpError(400, f"{where}: {first['msg']}", param=where) from None


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def model_card(model: str, created: int) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": created, "owned_by": "srtd-toy", "root": model}


def now() -> int:
    return int(time.time())
