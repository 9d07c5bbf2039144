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
from pydantic_ai.models import Model
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

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


CLAUDE = "claude-sonnet-4-5-20250929"


def answers(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("grey")])


def logged_media_tokens(capability: CtxfoldCapability, conversation_id: str) -> list[int]:
    """What the media of each logged message that has some costs."""
    logged = capability.session(conversation_id).messages()
    return [media_tokens([m]) for m in logged if "media" in m.extra]


async def two_runs(model: Model) -> list[int]:
    """Two runs of one conversation on `model`, each asking about the image; the media prices
    logged."""
    capability = CtxfoldCapability(store=MemoryStore())
    agent = Agent(model, capabilities=[capability])
    first = await agent.run([QUESTION, IMAGE], conversation_id="pa-called")
    history = first.all_messages()
    await agent.run([QUESTION, IMAGE], message_history=history, conversation_id="pa-called")
    return logged_media_tokens(capability, "pa-called")


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        (FunctionModel(answers, model_name=CLAUDE), 1_399),
        (TestModel(model_name=CLAUDE), 1_399),
        (FunctionModel(answers, model_name="gpt-4o"), 765),
    ],
    ids=["function-claude", "test-claude", "function-gpt"],
)
async def test_a_run_s_first_prompt_is_priced_for_the_model_it_goes_to(
    model: Model, tokens: int
) -> None:
    """A run's first prompt is logged before any response names a model: its image is priced
    for the model the request goes to (1,399 tokens for a 1024 x 1024 image sent to Claude, 765
    to GPT), in a conversation's first run and in a later one (whose prompt goes ahead)."""
    assert await two_runs(model) == [tokens, tokens]


async def test_a_fallback_model_prices_media_for_the_model_it_tries_first() -> None:
    """A `FallbackModel` sends each request to its first model first: its media is priced for
    that one."""
    claude, gpt = (FunctionModel(answers, model_name=n) for n in (CLAUDE, "gpt-4o"))
    assert await two_runs(FallbackModel(claude, gpt)) == [1_399, 1_399]
    assert await two_runs(FallbackModel(gpt, claude)) == [765, 765]


def test_the_model_called_wins_over_what_the_history_tells() -> None:
    """A prompt answered by Claude, sent now to a GPT model, is billed by OpenAI; a model that
    names nothing leaves it to the history."""
    prompt = ModelRequest(parts=[UserPromptPart([QUESTION, IMAGE], timestamp=WHEN)])
    history = [prompt, claude_answer()]
    (to_gpt,) = conv.to_messages_at(history, [0], sent_to=lambda: "openai")
    assert media_tokens(to_gpt) == 765
    (unnamed,) = conv.to_messages_at(history, [0], sent_to=lambda: None)
    assert media_tokens(unnamed) == 1_399


def test_a_message_without_media_never_asks_where_it_is_sent() -> None:
    """Where a message goes is asked only for media: a text prompt and a text answer cost no
    look at the model."""

    def asked() -> None:
        raise AssertionError("asked where a message without media goes")

    prompt = ModelRequest(parts=[UserPromptPart(QUESTION, timestamp=WHEN)])
    converted = conv.to_messages_at([prompt, claude_answer()], [0, 1], sent_to=asked)
    assert all("media" not in m.extra for messages in converted for m in messages)
