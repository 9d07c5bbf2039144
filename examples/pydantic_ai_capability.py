"""A pydantic-ai agent with ctxfold as a capability, offline.

pydantic-ai's `FunctionModel` plays the model: it asks for a file three times per task, then
answers. `all_messages()` keeps every message; the model is sent the compacted projection, which
stays inside a small window however long the conversation grows.

Run it: python examples/pydantic_ai_capability.py
"""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ctxfold import Budget, MemoryStore
from ctxfold.integrations.pydantic_ai import CtxfoldCapability


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Three reads after each user prompt, then an answer."""
    since_prompt = 0
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and any(
            p.part_kind == "user-prompt" for p in message.parts
        ):
            break
        since_prompt += isinstance(message, ModelResponse)
    if since_prompt < 3:
        path = f"src/m{len(messages)}.py"
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": path})])
    return ModelResponse(parts=[TextPart("The task is fixed.")])


capability = CtxfoldCapability(store=MemoryStore(), budget=Budget(window=8_000, max_output=1_000))
agent = Agent(FunctionModel(model), instructions="Fix bugs.", capabilities=[capability])


@agent.tool_plain
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"# {path}\n" + "def handler(event):\n    return event\n" * 40


async def main() -> None:
    history: list[ModelMessage] = []
    for task in range(12):
        result = await agent.run(
            f"Fix bug #{task}", message_history=history, conversation_id="example"
        )
        history = result.all_messages()
    session = capability.session("example")
    print(f"messages all_messages() returns: {len(history)}")
    print(f"messages the model is sent now: {len(session.messages())}")
    print(f"compactions in the log: {sum(e.type == 'compaction' for e in session.events())}")


if __name__ == "__main__":
    asyncio.run(main())
