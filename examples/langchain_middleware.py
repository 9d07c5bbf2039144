"""A LangChain v1 agent with ctxfold as middleware, offline.

langchain-core's `GenericFakeChatModel` plays the model: it asks for a file three times per
task, then answers. The checkpointer keeps every message of the thread; the model is sent the
compacted projection, which stays inside a small window however long the thread grows.

Run it: python examples/langchain_middleware.py
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxfold import Budget, MemoryStore
from ctxfold.integrations.langchain import CtxfoldMiddleware


class OfflineChat(GenericFakeChatModel):
    """The fake chat model, accepting the agent's tools (it answers from its script)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def script() -> Iterator[AIMessage]:
    task = 0
    while True:
        for step in range(3):
            call = {
                "name": "read_file",
                "args": {"path": f"src/m{task}_{step}.py"},
                "id": f"c{task}_{step}",
            }
            yield AIMessage(content="", tool_calls=[call])
        yield AIMessage(content=f"Task {task} is fixed.")
        task += 1


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"# {path}\n" + "def handler(event):\n    return event\n" * 40


def main() -> None:
    middleware = CtxfoldMiddleware(
        store=MemoryStore(), budget=Budget(window=8_000, max_output=1_000)
    )
    agent = create_agent(
        OfflineChat(messages=script()),
        [read_file],
        system_prompt="Fix bugs.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "example-thread"}}
    for task in range(12):
        agent.invoke({"messages": [{"role": "user", "content": f"Fix bug #{task}"}]}, config)

    state = agent.get_state(config).values["messages"]
    session = middleware.session("example-thread")
    print(f"messages the checkpointer holds: {len(state)}")
    print(f"messages the model is sent now: {len(session.messages())}")
    print(f"compactions in the log: {sum(e.type == 'compaction' for e in session.events())}")


if __name__ == "__main__":
    main()
