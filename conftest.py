"""What pytest collects from the package itself for its doctests.

An integration module imports its framework when it is imported, so its doctests are left out
where that framework is not installed or older than its extra declares (on Python 3.10 no
pydantic-ai release is new enough), as its tests are (`tests._frameworks`).
"""

from __future__ import annotations

from tests._frameworks import SOURCES, missing

collect_ignore = [
    f"src/ctxfold/integrations/{module}.py"
    for framework, modules in SOURCES.items()
    if missing(framework) is not None
    for module in modules
]
