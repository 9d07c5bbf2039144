"""Agents SDK media that answers a Claude model's call (through the SDK's Chat Completions or
LiteLLM models, which name the model on the items they return) is priced as Anthropic bills
it; items that name no model are priced as before."""

from __future__ import annotations

from typing import Any

import pytest

from tests._frameworks import minimum

pytest.importorskip("agents", minversion=minimum("agents"))

from agents.models.chatcmpl_converter import Converter
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
from openai.types.chat.chat_completion_message_function_tool_call import Function

from ctxfold import MemoryStore, Message
from ctxfold.integrations import _agents_items as conv
from ctxfold.integrations.openai_agents import CtxfoldSession
from tests._media import CALL_ID, DATA_URL, QUESTION, count

SHOT = {
    "type": "function_call_output",
    "call_id": CALL_ID,
    "output": [{"type": "input_image", "image_url": DATA_URL, "detail": "auto"}],
}


def call_from(model: str) -> list[Any]:
    """The items the SDK's own converter makes of a Chat Completions answer that calls `shot`,
    as its LiteLLM model returns them for `model`."""
    call = ChatCompletionMessageFunctionToolCall(
        id=CALL_ID, type="function", function=Function(name="shot", arguments="{}")
    )
    answer = ChatCompletionMessage(role="assistant", content=None, tool_calls=[call])
    return Converter.message_to_output_items(answer, provider_data={"model": model})


def media_tokens(messages: list[Message]) -> int:
    return count(messages) - count([m.replace(extra={}) for m in messages])


@pytest.mark.parametrize(
    ("model", "tokens"),
    [("anthropic/claude-sonnet-4-5-20250929", 1_399), ("gpt-4o", 765)],
    ids=["claude", "gpt-4o"],
)
def test_a_tool_s_image_is_priced_for_the_model_that_called_the_tool(
    model: str, tokens: int
) -> None:
    """The image answering a call that a Claude model made costs Anthropic's 1,399 tokens (1024
    x 1024), one answering GPT-4o's OpenAI's 765."""
    messages = conv.items_to_messages([*call_from(model), SHOT])
    assert media_tokens(messages) == tokens


async def test_the_session_logs_the_image_at_the_calling_model_s_price() -> None:
    """Through `CtxfoldSession.add_items`, as the Runner stores a turn."""
    session = CtxfoldSession("agents-claude", store=MemoryStore())
    await session.add_items([*call_from("anthropic/claude-sonnet-4-5-20250929"), SHOT])
    assert media_tokens(session.session.messages()) == 1_399


def test_items_that_name_no_model_are_priced_as_before() -> None:
    """The user's input and the Responses API's items name no model: an image among them is
    priced as OpenAI bills it, and its record is what it was."""
    question = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": QUESTION},
            {"type": "input_image", "image_url": DATA_URL, "detail": "auto"},
        ],
    }
    call = {"type": "function_call", "call_id": CALL_ID, "name": "shot", "arguments": "{}"}
    for batch in ([question], [call, SHOT]):
        messages = conv.items_to_messages(batch)
        assert media_tokens(messages) == 765
        records = [m.extra["media"] for m in messages if "media" in m.extra]
        assert all("provider" not in part for r in records for part in r["parts"])
