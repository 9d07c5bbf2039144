"""The promises in docs/guarantees.md and the tests that keep them point at each other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "guarantees.md"
NAME = re.compile(r"^\| `([a-z][a-z0-9-]+)` \|", re.MULTILINE)
CITED = re.compile(r"""@pytest\.mark\.guarantee\(\s*["']([^"']+)["']\s*\)""")
# Codes such as "L9" or "B11" name promises in a document outside this repository.
OUTSIDE_CODE = re.compile(r"\b(?:L1[0-3]|L[1-9]|C[1-4]|A1[01]|A[1-9]|B1[0-2]|B[1-9]|V[1-3])\b")


def listed() -> list[str]:
    return NAME.findall(DOC.read_text(encoding="utf-8"))


def cited() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for name in CITED.findall(path.read_text(encoding="utf-8")):
            out.setdefault(name, set()).add(path.name)
    return out


def test_every_promise_has_a_unique_name() -> None:
    names = listed()
    assert names, "docs/guarantees.md lists no promises"
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_every_promise_is_kept_by_at_least_one_test() -> None:
    untested = sorted(set(listed()) - set(cited()))
    assert untested == [], f"promises no test carries a guarantee marker for: {untested}"


def test_every_cited_promise_is_listed() -> None:
    unknown = {name: files for name, files in cited().items() if name not in set(listed())}
    assert unknown == {}, f"tests cite promises docs/guarantees.md does not list: {unknown}"


@pytest.mark.parametrize("folder", ["src", "tests", "benchmarks", "docs"])
def test_no_promise_is_named_by_a_code_from_outside_the_repository(folder: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in (".py", ".md") and path.name != "test_guarantees.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE_CODE.search(line)
    ]
    assert found == []
