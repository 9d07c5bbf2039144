"""ctxfold inside the agent frameworks people already run, one module per framework, each behind
its own extra:

- `ctxfold.integrations.openai_agents`: `CtxfoldSession`, an OpenAI Agents SDK session
  (``ctxfold[agents]``);
- `ctxfold.integrations.langchain`: `CtxfoldMiddleware`, a LangChain v1 agent middleware
  (``ctxfold[langchain]``);
- `ctxfold.integrations.pydantic_ai`: `CtxfoldCapability`, a pydantic-ai capability
  (``ctxfold[pydantic-ai]``);
- `ctxfold.integrations.otel`: a span per compaction (``ctxfold[otel]``).

Each is a small adapter over the public API (`Session`, `Compactor`, `recover_from_overflow`): the
framework's own state is never rewritten, every message is logged once, and the model is sent the
compacted projection. Each offers recall to the model as a tool of its own kind with
``recall=True``; `RecallTool` is the shape of that tool, for applications that bring their own.
"""

from ctxfold.integrations._common import RecallTool

__all__ = ["RecallTool"]
