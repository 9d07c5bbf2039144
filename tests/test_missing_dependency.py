"""A missing or too old optional dependency: the message says which release is needed, which one
is installed, and the pip command that helps, or that none can on this Python."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from pathlib import Path

import pytest

from ctxfold.errors import MissingDependencyError, _release
from tests._frameworks import FRAMEWORKS, SOURCES, lower_bound, python_bound

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxfold"
PYTEST = importlib.metadata.version("pytest")
HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_without_a_minimum_the_message_gives_the_install_command() -> None:
    error = MissingDependencyError("PostgresStore", "psycopg", "postgres")
    assert str(error) == "PostgresStore needs psycopg: pip install 'ctxfold[postgres]'"
    assert isinstance(error, ImportError)


def test_a_package_not_installed_is_named_with_its_lowest_release() -> None:
    error = MissingDependencyError("X", "no-such-distribution-ctxfold", "x", minimum="2.64")
    assert str(error) == (
        "X needs no-such-distribution-ctxfold 2.64 or later: pip install 'ctxfold[x]'"
    )


def test_an_older_release_is_named_with_the_upgrade_command() -> None:
    error = MissingDependencyError("X", "pytest", "test", minimum="999.0")
    assert str(error) == (
        f"X needs pytest 999.0 or later, and {PYTEST} is installed: "
        "pip install --upgrade 'ctxfold[test]'"
    )


def test_a_recent_release_that_fails_to_import_is_called_broken() -> None:
    error = MissingDependencyError("X", "pytest", "test", minimum="1.0")
    assert str(error) == (
        f"X cannot import pytest {PYTEST}: pip install --force-reinstall 'ctxfold[test]'"
    )


def test_a_release_this_python_cannot_install_is_said_so_without_a_pip_command() -> None:
    error = MissingDependencyError("X", "pytest", "test", minimum="999.0", python=(99, 0))
    assert str(error) == (
        f"X needs pytest 999.0 or later, which needs Python 99.0 or later; this is Python "
        f"{HERE} (with pytest {PYTEST})"
    )
    error = MissingDependencyError("X", "pytest", "test", minimum="999.0", python=(3, 0))
    assert "upgrade" in str(error)  # this Python is new enough: pip can help


@pytest.mark.parametrize(
    ("version", "numbers"),
    [
        ("2.64.0", (2, 64, 0)),
        ("2.64", (2, 64)),
        ("2.64.0rc1", (2, 64, 0)),
        ("1.0.post1", (1, 0)),
        ("0.24.0.dev3", (0, 24, 0)),
        ("abc", ()),
    ],
)
def test_releases_compare_by_their_leading_numbers(version: str, numbers: tuple[int, ...]) -> None:
    assert _release(version) == numbers


@pytest.mark.parametrize("module", sorted(FRAMEWORKS))
def test_each_integration_names_the_lowest_release_its_extra_declares(module: str) -> None:
    """The integration's MINIMUM, read from its source (it cannot be imported without its
    framework), is the extra's lower bound in pyproject.toml, so the error and pip agree."""
    extra, distribution = FRAMEWORKS[module]
    source = SRC / "integrations" / f"{SOURCES[module][0]}.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    values = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "MINIMUM" for t in node.targets)
        and isinstance(node.value, ast.Constant)
    ]
    assert values == [lower_bound(extra, distribution)], source


@pytest.mark.parametrize("module", sorted(FRAMEWORKS))
def test_each_integration_names_the_python_its_extra_needs(module: str) -> None:
    """The ``python=`` an integration's import error gives is the extra's ``python_version``
    marker in pyproject.toml (none where the extra has none), so a user on an older Python is
    told that no pip command helps exactly where pip would install nothing."""
    extra, distribution = FRAMEWORKS[module]
    source = SRC / "integrations" / f"{SOURCES[module][0]}.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "MissingDependencyError"
    ]
    assert calls, f"{source} raises no MissingDependencyError"
    for call in calls:
        given = next((k.value for k in call.keywords if k.arg == "python"), None)
        python = None if given is None else ast.literal_eval(given)
        assert python == python_bound(extra, distribution), f"{source}:{call.lineno}"
