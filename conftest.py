"""What pytest collects from the package itself for its doctests.

An integration module imports its framework when it is imported, so its doctests are left out
where that framework is not installed or older than its extra declares (on Python 3.10 no
pydantic-ai release is new enough), as its tests are (`tests._frameworks`).
"""

from __future__ import annotations

from tests._frameworks import missing

_NEEDS = {
    "src/ctxfold/integrations/openai_agents.py": "agents",
    "src/ctxfold/integrations/langchain.py": "langchain",
    "src/ctxfold/integrations/_langchain_messages.py": "langchain",
    "src/ctxfold/integrations/pydantic_ai.py": "pydantic_ai",
    "src/ctxfold/integrations/_pydantic_ai_messages.py": "pydantic_ai",
}

collect_ignore = [path for path, framework in _NEEDS.items() if missing(framework) is not None]
