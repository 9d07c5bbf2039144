"""LangChain messages whose media goes to Claude are priced as Anthropic bills it, with the
real langchain-core messages and agent (its fake chat model)."""

from __future__ import annotations

from typing import Any

import pytest

from tests._frameworks import minimum

pytest.importorskip("langchain", minversion=minimum("langchain"))

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxfold import MemoryStore
from ctxfold.integrations import _langchain_messages as conv
from ctxfold.integrations.langchain import CtxfoldMiddleware
from tests._media import (
    B64,
    CALL_ID,
    DATA_URL,
    QUESTION,
    anthropic_user,
    assert_counted_like,
    assert_logged_once,
    count,
    openai_user,
)

ANTHROPIC_IMAGE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": B64},
}
STANDARD_IMAGE = {"type": "image", "base64": B64, "mime_type": "image/png"}
CLAUDE_METADATA = {"model_provider": "anthropic", "model_name": "claude-sonnet-4-5-20250929"}
"""What ChatAnthropic writes in an answer's ``response_metadata``."""


def media_tokens(message: Any) -> int:
    converted = conv.to_message(message, index=0)
    return count([converted]) - count([converted.replace(extra={})])


def test_an_image_in_anthropic_blocks_costs_what_anthropic_bills() -> None:
    """A human message holding an image in Anthropic's block shape is written for Claude: it
    costs what `from_anthropic` counts (1,399 tokens for 1024 x 1024, not OpenAI's 765), is
    logged once, and comes back as it went in."""
    human = HumanMessage(content=[{"type": "text", "text": QUESTION}, ANTHROPIC_IMAGE], id="h1")
    converted = conv.to_message(human, index=0)
    assert_counted_like([converted], anthropic_user())
    assert media_tokens(human) == 1_399
    assert_logged_once([converted])
    assert conv.from_message(converted) == human


def test_an_image_a_tool_returns_in_anthropic_blocks_costs_what_anthropic_bills() -> None:
    """A tool's image in Anthropic's block shape is priced as Anthropic bills it."""
    result = ToolMessage(content=[ANTHROPIC_IMAGE], tool_call_id=CALL_ID)
    assert media_tokens(result) == 1_399


def test_an_answer_from_claude_prices_its_media_as_anthropic_bills() -> None:
    """An AI message whose metadata names a Claude model (as ChatAnthropic writes it) prices
    its images as Anthropic bills them, whatever block shape holds them."""
    answer = AIMessage(content=[STANDARD_IMAGE], response_metadata=CLAUDE_METADATA)
    assert media_tokens(answer) == 1_399
    from_gpt = AIMessage(
        content=[STANDARD_IMAGE],
        response_metadata={"model_provider": "openai", "model_name": "gpt-4o-2024-08-06"},
    )
    assert media_tokens(from_gpt) == 765


def test_media_that_says_nothing_of_its_provider_is_priced_as_before() -> None:
    """LangChain's standard blocks are written for any model, and a human message names none:
    its image is priced as OpenAI bills it, and its record is what it was. Blocks of both
    shapes in one message say nothing either."""
    human = HumanMessage(content=[{"type": "text", "text": QUESTION}, STANDARD_IMAGE])
    converted = conv.to_message(human, index=0)
    assert_counted_like([converted], openai_user(DATA_URL))
    assert all("provider" not in part for part in converted.extra["media"]["parts"])
    openai_image = {"type": "image_url", "image_url": {"url": DATA_URL}}
    assert media_tokens(HumanMessage(content=[ANTHROPIC_IMAGE, openai_image])) == 2 * 765


def test_the_middleware_logs_an_anthropic_block_image_at_anthropic_s_price() -> None:
    """Through a real agent: the question with an image in Anthropic's shape reaches the model
    unchanged, and the log prices it as Anthropic bills it."""
    model = GenericFakeChatModel(messages=iter([AIMessage(content="grey")]))
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = create_agent(model, [], middleware=[middleware], checkpointer=InMemorySaver())
    question = HumanMessage(content=[{"type": "text", "text": QUESTION}, ANTHROPIC_IMAGE])
    agent.invoke({"messages": [question]}, {"configurable": {"thread_id": "lc-claude"}})
    user = next(m for m in middleware.session("lc-claude").messages() if m.role == "user")
    assert_counted_like([user], anthropic_user())
