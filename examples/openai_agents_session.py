"""An OpenAI Agents SDK agent whose memory is a ctxfold session, offline.

The SDK's own `ScriptedModel` plays the model: it asks for a file three times per task, then
answers. The session keeps every item in the ctxfold log; the model is sent the compacted
projection, which stays inside a small window however long the agent runs.

Run it: python examples/openai_agents_session.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from ctxfold import Budget, Compactor, SQLiteStore
from ctxfold.integrations.openai_agents import CtxfoldSession


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"# {path}\n" + "def handler(event):\n    return event\n" * 40


def script(tasks: int) -> list[object]:
    steps: list[object] = []
    for task in range(tasks):
        for step in range(3):
            path = f"src/module_{task}_{step}.py"
            steps.append([function_call("read_file", {"path": path}, call_id=f"c{task}_{step}")])
        steps.append([assistant_message(f"Task {task} is fixed.", item_id=f"m{task}")])
    return steps


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(str(Path(folder) / "agent.db"))
        compactor = Compactor(Budget(window=8_000, max_output=1_000))
        session = CtxfoldSession("example-agent", store=store, compactor=compactor)
        model = ScriptedModel(script(tasks=12))
        agent = Agent(name="fixer", instructions="Fix bugs.", model=model, tools=[read_file])
        config = RunConfig(
            call_model_input_filter=session.model_input_filter, tracing_disabled=True
        )
        for task in range(12):
            await Runner.run(agent, f"Fix bug #{task}", session=session, run_config=config)

        stored = await session.get_items()
        sent = model.last_call.input if model.last_call else []
        print(f"items the session holds: {len(stored)}")
        print(f"items in the last request: {len(sent)}")
        compactions = sum(e.type == "compaction" for e in session.session.events())
        print(f"compactions in the log: {compactions}")
        store.close()


if __name__ == "__main__":
    asyncio.run(main())
