"""pydantic-ai media sent to a Claude model is priced as Anthropic bills it, with the real
pydantic-ai messages and agent (its function model)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from tests._frameworks import minimum

pytest.importorskip("pydantic_ai", minversion=minimum("pydantic_ai"))

from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ctxfold import MemoryStore, Message
from ctxfold.integrations import _pydantic_ai_messages as conv
from ctxfold.integrations.pydantic_ai import CtxfoldCapability
from tests._media import CALL_ID, PNG, QUESTION, anthropic_user, assert_counted_like, count

WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
IMAGE = BinaryContent(data=PNG, media_type="image/png")


def claude_answer(*parts: Any) -> ModelResponse:
    """A response as pydantic-ai's Anthropic model records it."""
    return ModelResponse(
        parts=list(parts or [TextPart("grey")]),
        model_name="claude-sonnet-4-5-20250929",
        provider_name="anthropic",
        timestamp=WHEN,
    )


def media_tokens(messages: list[Message]) -> int:
    return count(messages) - count([m.replace(extra={}) for m in messages])


def test_a_prompt_answered_by_claude_prices_its_image_as_anthropic_bills() -> None:
    """A prompt's image goes to the model that answers it: answered by Claude, it costs what
    `from_anthropic` counts (1,399 tokens for 1024 x 1024, not OpenAI's 765)."""
    prompt = ModelRequest(parts=[UserPromptPart([QUESTION, IMAGE], timestamp=WHEN)])
    converted, _ = conv.to_messages_at([prompt, claude_answer()], [0, 1])
    assert_counted_like(converted, anthropic_user())
    assert media_tokens(converted) == 1_399


def test_a_tool_return_after_claude_s_call_prices_its_image_as_anthropic_bills() -> None:
    """A tool's image not answered yet goes to the model that made the call."""
    call = claude_answer(ToolCallPart("shot", {}, tool_call_id=CALL_ID))
    returned = ModelRequest(
        parts=[ToolReturnPart("shot", IMAGE, tool_call_id=CALL_ID, timestamp=WHEN)]
    )
    (messages,) = conv.to_messages_at([call, returned], [1])
    assert media_tokens(messages) == 1_399


def test_an_image_claude_made_is_priced_as_anthropic_bills() -> None:
    """A response's file goes back to the model that made it."""
    (messages,) = conv.to_messages_at([claude_answer(TextPart("here"), FilePart(IMAGE))], [0])
    assert media_tokens(messages) == 1_399


def test_a_request_with_no_response_to_tell_is_priced_as_before() -> None:
    """A request converted on its own, or before any model answered, names no model: its
    image is priced as OpenAI bills it, and its record is what it was."""
    prompt = ModelRequest(parts=[UserPromptPart([QUESTION, IMAGE], timestamp=WHEN)])
    for messages in (conv.to_messages(prompt, index=0), conv.to_messages_at([prompt], [0])[0]):
        assert media_tokens(messages) == 765
        assert all("provider" not in p for m in messages for p in m.extra["media"]["parts"])


async def test_a_claude_agent_logs_its_tool_s_image_at_anthropic_s_price() -> None:
    """Through a real agent whose model reports a Claude model name: the image a tool returns
    is logged at Anthropic's price."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("shot", {}, tool_call_id=CALL_ID)])
        return ModelResponse(parts=[TextPart("grey")])

    capability = CtxfoldCapability(store=MemoryStore())
    agent = Agent(
        FunctionModel(model, model_name="claude-sonnet-4-5-20250929"), capabilities=[capability]
    )

    @agent.tool_plain
    def shot() -> BinaryContent:
        """Take a screenshot."""
        return IMAGE

    await agent.run(QUESTION, conversation_id="pa-claude")
    logged = capability.session("pa-claude").messages()
    with_media = [m for m in logged if "media" in m.extra]
    assert with_media
    assert media_tokens(with_media) == 1_399 * len(with_media)
