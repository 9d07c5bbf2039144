"""Test runs: which commands run tests, and what their output says about the outcome.

`test_target` names what a command tests (``"pytest tests/test_io.py"``, ``"go test ./..."``), so
that a later run of the same target can resolve an earlier failure; `test_outcome` reads the
summary line a runner prints (pytest, unittest and Django's runtests.py, cargo, jest and vitest,
mocha, go, tox).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from ctxfold.summarizers._lines import matches

PYTHONS = re.compile(r"^(?:python(?:\d+(?:\.\d+)?)?|pypy\d*)$")
"""Program names that are a Python interpreter."""

_TEST_TOOLS = frozenset(
    {"pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "rspec", "phpunit", "ctest",
     "nosetests", "trial"}
)  # fmt: skip
_TEST_SUBCOMMANDS = {
    "npm": {"test", "t"},
    "yarn": {"test"},
    "pnpm": {"test"},
    "bun": {"test"},
    "go": {"test"},
    "cargo": {"test", "nextest"},
    "make": {"test", "tests", "check", "test-all"},
    "mvn": {"test", "verify"},
    "gradle": {"test", "check"},
    "gradlew": {"test", "check"},
    "dotnet": {"test"},
    "mix": {"test"},
    "bundle": {"exec"},
}
# Test summaries, most specific first; the last match of the first family found wins.
_PYTEST = re.compile(
    r"^=+ ((?:\d+ \w+|no tests ran)(?:, \d+ \w+)*) in [\d.]+s(?: \([^)\n]*\))? =+[ \t]*$"
    r"|^((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun))"
    r"(?:, \d+ \w+)*) in [\d.]+s\b",
    re.MULTILINE,
)
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s[ \t]*$", re.MULTILINE)
_UNITTEST_END = re.compile(r"^(OK(?: \([^)\n]*\))?|FAILED \([^)\n]*\))[ \t]*$", re.MULTILINE)
_OTHER_SUMMARIES = (
    re.compile(r"^(test result: .+?)[ \t]*$", re.MULTILINE),  # cargo
    re.compile(r"^(Tests:[ \t]+.+?)[ \t]*$", re.MULTILINE),  # jest, vitest
    re.compile(r"^[ \t]*(\d+ (?:passing|failing))\b", re.MULTILINE),  # mocha: failing comes last
    re.compile(r"^[ \t]*(congratulations :\)|ERROR: +\S+: commands failed)", re.MULTILINE),
)
_GO_PACKAGE = re.compile(r"^(ok|FAIL)[ \t]+\S+", re.MULTILINE)
NEEDS: dict[re.Pattern[str], tuple[str, ...]] = {
    _PYTEST: (" in ",),
    _UNITTEST_RAN: ("Ran ",),
    _OTHER_SUMMARIES[0]: ("test result: ",),
    _OTHER_SUMMARIES[1]: ("Tests:",),
    _OTHER_SUMMARIES[2]: (" passing", " failing"),
    _OTHER_SUMMARIES[3]: ("congratulations :)", ": commands failed"),
    _GO_PACKAGE: ("ok ", "ok\t", "FAIL ", "FAIL\t"),
}
"""For each summary pattern, the literals one of which every match holds, on its line: every
output a test run gives is read for every summary, and an output is mostly lines that hold
none of them, which the passes skip (`ctxfold.summarizers._lines.matches`)."""


def test_target(program: str, words: list[str]) -> str | None:
    """The test target a command runs, or None: its runner and what it selects.

    `program` is the command's program name and `words` all its words. Two runs with equal
    targets test the same thing (output options such as ``-q`` or ``-W ignore`` do not count).

    >>> test_target("python3", ["python3", "-m", "pytest", "-q", "tests/test_io.py"])
    'pytest tests/test_io.py'
    """
    args = words[1:]
    if PYTHONS.match(program):
        if len(args) >= 2 and args[0] == "-m" and args[1] in ("pytest", "unittest", "tox", "nose"):
            return _key(args[1], args[2:])
        if args and posixpath.basename(args[0]) in ("runtests.py", "manage.py"):
            if posixpath.basename(args[0]) == "manage.py" and args[1:2] != ["test"]:
                return None
            return _key(posixpath.basename(args[0]), args[1:])
        return None
    if program in _TEST_TOOLS:
        return _key("pytest" if program == "py.test" else program, args)
    if program == "runtests.py":
        return _key("runtests.py", args)
    subcommands = _TEST_SUBCOMMANDS.get(program.removeprefix("./"))
    if subcommands and args:
        if program == "bundle":
            return test_target(args[1], args[1:]) if len(args) > 1 else None
        if args[0] in subcommands or (args[0] == "run" and args[1:2] == ["test"]):
            return _key(f"{program} {args[0]}", args[1:])
    return None


def _key(runner: str, args: Sequence[str]) -> str:
    # Targets and selections (-k, -m, --run) identify what is tested; output options do not.
    selectors = {"-k", "-m", "--run", "-run", "-e", "--env"}
    kept: list[str] = []
    skip_value = False
    for i, arg in enumerate(args):
        if skip_value:
            skip_value = False
            continue
        if arg in selectors and i + 1 < len(args):
            kept += [arg, args[i + 1]]
            skip_value = True
        elif arg in ("-W", "-p", "-c", "-o", "-n", "--tb", "-x", "--rootdir", "--settings"):
            skip_value = arg not in ("-x",)
        elif not arg.startswith("-"):
            kept.append(arg)
    return " ".join([runner, *kept])


def test_outcome(output: str) -> str | None:
    """The test outcome an output reports (``"3 failed, 42 passed"``, ``"Ran 12 tests: OK"``),
    verbatim from its summary line; None when it shows none."""
    found = None
    for match in matches(_PYTEST, NEEDS[_PYTEST], output):
        found = match.group(1) or match.group(2)
    if found:
        return found
    ran = None
    for match in matches(_UNITTEST_RAN, NEEDS[_UNITTEST_RAN], output):
        ran = match
    if ran is not None:
        end = None
        for match in _UNITTEST_END.finditer(output, ran.end()):
            end = match.group(1)
        return f"Ran {ran.group(1)} tests: {end}" if end else f"Ran {ran.group(1)} tests"
    for pattern in _OTHER_SUMMARIES:
        for match in matches(pattern, NEEDS[pattern], output):
            found = match.group(1)
        if found:
            return found
    packages = [m.group(1) for m in matches(_GO_PACKAGE, NEEDS[_GO_PACKAGE], output)]
    if packages:
        return f"{packages.count('ok')} ok, {packages.count('FAIL')} FAIL"
    return None
