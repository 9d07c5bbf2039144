"""LangChain messages whose media goes to Claude are priced as Anthropic bills it, with the
real langchain-core messages and agent (its fake chat model)."""

from __future__ import annotations

from typing import Any

import pytest

from tests._frameworks import minimum

pytest.importorskip("langchain", minversion=minimum("langchain"))

from langchain.agents import create_agent
from langchain_core.language_models import LangSmithParams
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
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


class NamedChat(GenericFakeChatModel):
    """langchain-core's fake chat model reporting a model name, as ChatOpenAI names its model
    (`model_name`), and taking tools."""

    model_name: str

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


class ProviderOnlyChat(GenericFakeChatModel):
    """A fake chat model that names its provider only in its LangSmith tracing params, as every
    chat model fills them (ChatAnthropic's ``ls_provider`` is "anthropic")."""

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return LangSmithParams(ls_provider="anthropic", ls_model_type="chat")


CLAUDE = "claude-sonnet-4-5-20250929"
STANDARD_QUESTION = [{"type": "text", "text": QUESTION}, STANDARD_IMAGE]
CONFIG = {"thread_id": "lc-called"}


def logged_media_tokens(middleware: CtxfoldMiddleware, thread_id: str) -> list[int]:
    """What the media of each logged message that has some costs."""
    logged = middleware.session(thread_id).messages()
    return [count([m]) - count([m.replace(extra={})]) for m in logged if "media" in m.extra]


def run(model: GenericFakeChatModel, *questions: list[Any], tools: Any = ()) -> list[int]:
    """Each question as a run of one agent (one thread) on `model`; the media prices logged."""
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = create_agent(model, list(tools), middleware=[middleware], checkpointer=InMemorySaver())
    for question in questions:
        agent.invoke({"messages": [HumanMessage(content=question)]}, {"configurable": CONFIG})
    return logged_media_tokens(middleware, CONFIG["thread_id"])


@pytest.mark.parametrize(
    ("name", "tokens"), [(CLAUDE, 1_399), ("claude-opus-4-1", 1_399), ("gpt-4o", 765)]
)
def test_a_standard_block_image_is_priced_for_the_model_the_agent_calls(
    name: str, tokens: int
) -> None:
    """A human message's image in LangChain's standard blocks says nothing of where it goes:
    the middleware prices it for the agent's chat model (1,399 tokens for a 1024 x 1024 image
    sent to Claude, 765 to GPT), in a run's first call and in a later run's (which the
    middleware logs with the answer)."""
    model = NamedChat(messages=iter([AIMessage("grey"), AIMessage("still grey")]), model_name=name)
    assert run(model, STANDARD_QUESTION, STANDARD_QUESTION) == [tokens, tokens]


async def test_an_async_agent_prices_a_standard_block_image_for_its_model() -> None:
    """The same through `ainvoke`."""
    model = NamedChat(messages=iter([AIMessage("grey"), AIMessage("still")]), model_name=CLAUDE)
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = create_agent(model, [], middleware=[middleware], checkpointer=InMemorySaver())
    for _ in range(2):
        question = HumanMessage(content=STANDARD_QUESTION)
        await agent.ainvoke({"messages": [question]}, {"configurable": CONFIG})
    assert logged_media_tokens(middleware, CONFIG["thread_id"]) == [1_399, 1_399]


def test_a_tool_s_standard_block_image_is_priced_for_the_model_the_agent_calls() -> None:
    """A tool's image in standard blocks goes back to the agent's model: priced for Claude."""

    @tool(response_format="content")
    def shot() -> list[dict[str, Any]]:
        """Take a screenshot."""
        return [STANDARD_IMAGE]

    call = {"name": "shot", "args": {}, "id": CALL_ID}
    answers = iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="grey")])
    model = NamedChat(messages=answers, model_name=CLAUDE)
    assert run(model, [{"type": "text", "text": QUESTION}], tools=[shot]) == [1_399]


def test_a_model_that_names_its_provider_only_for_tracing_is_understood() -> None:
    """A chat model whose name says nothing, but whose LangSmith params name Anthropic as its
    provider, gets its media priced as Anthropic bills it."""
    model = ProviderOnlyChat(messages=iter([AIMessage("grey")]))
    assert run(model, STANDARD_QUESTION) == [1_399]


def test_the_model_called_wins_over_what_a_message_says_of_itself() -> None:
    """Blocks in Anthropic's shape sent to a GPT model are billed by OpenAI: the agent's model
    decides; with a model that names nothing (the plain fake model), the blocks do."""
    question = [{"type": "text", "text": QUESTION}, ANTHROPIC_IMAGE]
    gpt = NamedChat(messages=iter([AIMessage("grey")]), model_name="gpt-4o")
    assert run(gpt, question) == [765]
    unnamed = GenericFakeChatModel(messages=iter([AIMessage("grey")]))
    assert run(unnamed, question) == [1_399]


def test_a_message_without_media_never_asks_where_it_is_sent() -> None:
    """Where a message goes is asked only for media: a text message costs no look at the
    model."""

    def asked() -> None:
        raise AssertionError("asked where a message without media goes")

    converted = conv.to_message(HumanMessage(content=QUESTION), index=0, sent_to=asked)
    assert converted.text == QUESTION
    assert "media" not in converted.extra
