"""The frameworks the integrations run inside, at the oldest releases their extras declare.

An integration's tests skip, with a reason, where its framework is not installed or older than
the extra's lower bound (``pytest.importorskip(module, minversion=minimum(module))``; Python 3.10
gets no pydantic-ai release new enough), and so does the doctest of its module (the root
conftest.py); they run, and fail loudly, wherever it is there. The bounds are read from
pyproject.toml, the one place they are written, so the tests skip exactly where pip would not
install the extra.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from ctxfold.errors import _release as release

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

FRAMEWORKS = {
    # module: (extra, distribution)
    "agents": ("agents", "openai-agents"),
    "langchain": ("langchain", "langchain"),
    "pydantic_ai": ("pydantic-ai", "pydantic-ai-slim"),
}
SOURCES = {
    # module: ctxfold.integrations modules that import it, the integration itself first
    "agents": ("openai_agents",),
    "langchain": ("langchain", "_langchain_messages"),
    "pydantic_ai": ("pydantic_ai", "_pydantic_ai_messages"),
}
EXAMPLE_FRAMEWORKS = {
    # script in examples/: the framework it runs inside
    "openai_agents_session": "agents",
    "langchain_middleware": "langchain",
    "pydantic_ai_capability": "pydantic_ai",
}


def requirement(extra: str, distribution: str) -> str:
    """The entry of `distribution` in the extra `extra` of pyproject.toml, as written there
    (release bound and environment marker included)."""
    text = PYPROJECT.read_text(encoding="utf-8")
    line = re.search(rf"^{re.escape(extra)} = \[(.*)\]$", text, re.MULTILINE)
    if line is None:
        raise LookupError(f"pyproject.toml has no extra {extra!r}")
    # The name whole: "langchain" is not the start of "langchain-core".
    entry = re.search(rf'"({re.escape(distribution)}(?![\w.-])[^"]*)"', line.group(1))
    if entry is None:
        raise LookupError(f"the extra {extra!r} does not list {distribution}")
    return entry.group(1)


def lower_bound(extra: str, distribution: str) -> str:
    """The ``>=`` bound of `distribution` in the extra `extra` of pyproject.toml."""
    bound = re.match(r"[^>;]*>=([0-9][^,;\s]*)", requirement(extra, distribution))
    if bound is None:
        raise LookupError(f"the extra {extra!r} gives {distribution} no lower bound")
    return bound.group(1)


def python_bound(extra: str, distribution: str) -> tuple[int, ...] | None:
    """The Python release that the extra `extra` needs for `distribution` (its
    ``python_version >=`` marker), or None when the extra installs it on every Python."""
    marker = re.search(r"python_version\s*>=\s*'([0-9.]+)'", requirement(extra, distribution))
    return None if marker is None else release(marker.group(1))


def minimum(module: str) -> str:
    """The lowest release of the framework `module` that its extra declares."""
    return lower_bound(*FRAMEWORKS[module])


def missing(module: str) -> str | None:
    """Why the framework `module` cannot be tested here, or None when it can."""
    extra, distribution = FRAMEWORKS[module]
    try:
        found = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return f"{distribution} is not installed (the {extra!r} extra)"
    if release(found) < release(minimum(module)):
        return f"{distribution} {found} is older than the {extra!r} extra's {minimum(module)}"
    return None
