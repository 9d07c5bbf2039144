"""One error tree: every deliberate raise in ctxfold is a `CtxfoldError` subclass."""

from __future__ import annotations

import ast
import builtins
import inspect
from pathlib import Path

import pytest

import ctxfold.errors as errors
from ctxfold.errors import CtxfoldError

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxfold"
BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def deliberate_raises() -> list[tuple[str, int, str]]:
    """(file, line, class name) of every ``raise Name(...)`` or ``raise Name`` in the source."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # A module's __getattr__ must raise AttributeError: that is the language's protocol.
        exempt = {
            id(raise_)
            for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef) and function.name == "__getattr__"
            for raise_ in ast.walk(function)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None or id(node) in exempt:
                continue
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name):
                found.append((str(path.relative_to(SRC)), node.lineno, target.id))
    return found


def test_no_bare_builtin_exception_and_never_the_root_is_raised() -> None:
    bad = [
        f"{file}:{line} raises {name}"
        for file, line, name in deliberate_raises()
        if name in BUILTIN_EXCEPTIONS or name == "CtxfoldError"
    ]
    assert bad == []


def test_every_error_class_lives_in_errors_and_descends_from_the_root() -> None:
    classes = [
        value
        for value in vars(errors).values()
        if inspect.isclass(value) and issubclass(value, BaseException)
    ]
    assert all(issubclass(c, CtxfoldError) for c in classes)
    assert all(c.__module__ == "ctxfold.errors" for c in classes)


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("InvalidInputError", ValueError),
        ("ConfigurationError", ValueError),
        ("ConfigurationError", TypeError),
        ("BudgetError", ValueError),
        ("StoreClosedError", RuntimeError),
        ("StoreUnavailableError", ConnectionError),
        ("MissingDependencyError", ImportError),
    ],
)
def test_errors_are_also_the_builtin_a_caller_may_already_catch(
    name: str, builtin: type[BaseException]
) -> None:
    assert issubclass(getattr(errors, name), builtin)
