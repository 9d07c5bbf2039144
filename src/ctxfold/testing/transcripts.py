"""A seeded generator of realistic coding-agent sessions, for the demo and for large test histories.

`generate(seed, steps)` writes what an agent fixing bugs in a small Python project would produce: a
system prompt, the task, then `steps` assistant steps that call a shell and an editor, with the long
outputs such work brings (file listings, source files, test logs, diffs), a parallel batch of reads,
failing tests with tracebacks and their fixes, and now and then a user correcting course. The same
seed and arguments always give the same messages, so tests can build big histories without
shipping data.

>>> messages = generate(seed=1, steps=12)
>>> messages[0].role, messages[1].role, messages[-1].role
('system', 'user', 'assistant')
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass

from ctxfold.errors import ConfigurationError
from ctxfold.messages import Message, ToolCall

PROJECT = "tallyho"
MODULES = ("currency", "parser", "ledger", "cli", "storage", "report", "models", "tax")

SYSTEM_PROMPT = (
    "You are a careful software engineer working in a git checkout of the `tallyho` project "
    "(a small Python library and CLI for invoices and ledgers). You can run shell commands with "
    "the `shell` tool and edit files with the `editor` tool. Read code before changing it, keep "
    "the public API stable, run the relevant tests after every change, and finish with a short "
    "summary of what you changed and why."
)

TASK = (
    "The nightly CI run of tallyho is red. Please get the test suite passing again without "
    "changing the public API. Start with tests/test_currency.py, which fails with a rounding "
    "error since the switch to Decimal, then look at whatever else fails. Keep notes of which "
    "files you touched."
)

CORRECTIONS = (
    "Please don't change the signature of convert(); other packages call it positionally.",
    "Use `python -m pytest -q` rather than bare pytest, the venv on this box is odd.",
    "Leave the migrations folder alone, those files are generated.",
    "Before you go further: the rounding rule is banker's rounding (ROUND_HALF_EVEN), not half-up.",
    "Keep the fix minimal, we want to backport it to the 2.3 branch.",
)


@dataclass(frozen=True)
class _Bug:
    """One failing test the agent finds and fixes."""

    module: str
    test: str
    error: str
    old: str
    new: str


BUGS = (
    _Bug(
        "currency",
        "test_round_half_even",
        "AssertionError: assert Decimal('2.68') == Decimal('2.67')",
        "return amount.quantize(CENT, rounding=ROUND_HALF_UP)",
        "return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)",
    ),
    _Bug(
        "parser",
        "test_parse_iso_dates",
        "ValueError: time data '2024-02-30' does not match format '%Y-%m-%d'",
        "return datetime.strptime(text, '%Y-%m-%d')",
        "return _parse_date_or_raise(text, field=field)",
    ),
    _Bug(
        "ledger",
        "test_balance_after_refund",
        "KeyError: 'refund'",
        "sign = SIGNS[entry.kind]",
        "sign = SIGNS.get(entry.kind, -1 if entry.kind == 'refund' else 1)",
    ),
    _Bug(
        "cli",
        "test_report_since_flag",
        "TypeError: report() got an unexpected keyword argument 'since'",
        "def report(ledger_path, fmt='text'):",
        "def report(ledger_path, fmt='text', since=None):",
    ),
    _Bug(
        "storage",
        "test_migrate_v3",
        "sqlite3.OperationalError: no such column: invoices.currency",
        "SELECT id, total FROM invoices",
        "SELECT id, total, currency FROM invoices",
    ),
    _Bug(
        "tax",
        "test_reverse_charge_eu",
        "AssertionError: assert Decimal('19.00') == Decimal('0.00')",
        "if customer.country != seller.country:",
        "if customer.vat_id and customer.country != seller.country:",
    ),
)

_WORDS = (
    "amount", "invoice", "entry", "total", "currency", "rate", "line", "customer", "period",
    "balance", "refund", "account", "ledger", "record", "due", "issued", "code", "row",
)  # fmt: skip


def generate(seed: int = 0, steps: int = 60, *, corrections: bool = True) -> list[Message]:
    """A deterministic coding-agent session with `steps` assistant tool-calling steps.

    The history starts with a system prompt and the task, ends with the agent's closing summary,
    and is valid for both providers: every call has its result, parallel calls answer together.
    `corrections` lets the user interject a correction about every 25 steps (each starts a turn).
    """
    if steps < 1:
        raise ConfigurationError(f"steps must be at least 1, not {steps}")
    writer = _Writer(random.Random(seed), seed)
    out = [Message("system", SYSTEM_PROMPT), Message("user", TASK)]
    for done, messages in enumerate(writer.steps(), 1):
        out.extend(messages)
        if done >= steps:
            break
        if corrections and done % 25 == 0:
            out.append(Message("user", CORRECTIONS[(done // 25 - 1) % len(CORRECTIONS)]))
    out.append(Message("assistant", writer.closing()))
    return out


class _Writer:
    """Produces the steps of the session one at a time, keeping track of what the agent did."""

    def __init__(self, rng: random.Random, seed: int) -> None:
        self.rng = rng
        self.seed = seed
        self.fixed: list[str] = []
        self.touched: list[str] = []

    def steps(self) -> Iterator[list[Message]]:
        yield self.shell(
            "Let me look at the layout of the repository first.", "git ls-files", self.listing()
        )
        yield self.batch([f"src/{PROJECT}/{m}.py" for m in ("currency", "models", "ledger")])
        round_no = 0
        while True:
            bug = BUGS[round_no % len(BUGS)]
            yield from self.fix(bug, round_no)
            round_no += 1
            for _ in range(self.rng.randint(2, 5)):
                yield self.filler()

    def fix(self, bug: _Bug, round_no: int) -> Iterator[list[Message]]:
        path = f"src/{PROJECT}/{bug.module}.py"
        test_file = f"tests/test_{bug.module}.py"
        test_id = f"{test_file}::{bug.test}" + (
            f"_{round_no // len(BUGS)}" if round_no >= len(BUGS) else ""
        )
        yield self.shell(
            f"Running the tests for {bug.module} to see the failure.",
            f"python -m pytest -q {test_file}",
            self.failing_log(test_id, path, bug),
        )
        yield self.shell(
            f"The traceback points into {path}; reading it.", f"cat -n {path}", self.source(path)
        )
        yield self.shell(
            "Checking the other call sites before I change anything.",
            f'grep -rn "{bug.old.split("(")[0].split()[-1]}" src tests',
            self.grep_hits(path),
        )
        yield self.edit(path, bug)
        yield self.shell(
            "Re-running the failing test.",
            f"python -m pytest -q {test_file}",
            self.passing_log(test_file),
        )
        self.fixed.append(test_id)
        yield self.shell(
            "The test passes; here is the diff so far.",
            "git diff --stat && git diff",
            self.diff(path, bug),
        )

    def filler(self) -> list[Message]:
        kind = self.rng.choice(("read", "grep", "suite", "listing", "batch"))
        module = self.rng.choice(MODULES)
        path = f"src/{PROJECT}/{module}.py"
        if kind == "read":
            return self.shell(
                f"Reading {path} for context.", f"sed -n 1,200p {path}", self.source(path)
            )
        if kind == "grep":
            word = self.rng.choice(_WORDS)
            return self.shell(
                f"Where else is `{word}` used?", f"grep -rn {word} src", self.grep_hits(path)
            )
        if kind == "suite":
            return self.shell(
                "Running the whole suite to check for regressions.",
                "python -m pytest -q",
                self.passing_log("tests"),
            )
        if kind == "listing":
            return self.shell(
                "Looking at the tests folder.", "ls -la tests tests/fixtures", self.listing()
            )
        paths = self.rng.sample([f"src/{PROJECT}/{m}.py" for m in MODULES], 3)
        return self.batch(paths)

    def closing(self) -> str:
        fixed = "\n".join(f"- {t}" for t in self.fixed) or "- (none yet)"
        touched = ", ".join(sorted(set(self.touched))) or "no files"
        return f"All targeted tests pass now. Fixed:\n{fixed}\nFiles touched: {touched}."

    # -- one step -------------------------------------------------------------------------------

    def call_id(self) -> str:
        return f"call_{self.rng.getrandbits(64):016x}"

    def shell(self, thought: str, command: str, output: str) -> list[Message]:
        call = ToolCall(self.call_id(), "shell", json.dumps({"command": command}))
        return [
            Message("assistant", thought, (call,)),
            Message("tool", output, tool_call_id=call.id),
        ]

    def batch(self, paths: list[str]) -> list[Message]:
        calls = tuple(
            ToolCall(self.call_id(), "shell", json.dumps({"command": f"cat -n {p}"})) for p in paths
        )
        thought = "Reading these files side by side: " + ", ".join(paths) + "."
        results = [
            Message("tool", self.source(p), tool_call_id=c.id)
            for c, p in zip(calls, paths, strict=True)
        ]
        return [Message("assistant", thought, calls), *results]

    def edit(self, path: str, bug: _Bug) -> list[Message]:
        args = {"command": "str_replace", "path": path, "old_str": bug.old, "new_str": bug.new}
        call = ToolCall(self.call_id(), "editor", json.dumps(args))
        self.touched.append(path)
        line = self.rng.randint(20, 120)
        snippet = "\n".join(f"{line + i:6d}\t{text}" for i, text in enumerate(self.code_lines(3)))
        result = (
            f"The file {path} has been edited. "
            "Here's the result of running `cat -n` on a snippet:\n"
            f"{snippet}\n{line + 3:6d}\t        {bug.new}\n"
            "Review the changes and make sure they are as expected."
        )
        thought = f"Fixing it in {path}: `{bug.old}` becomes `{bug.new}`."
        return [
            Message("assistant", thought, (call,)),
            Message("tool", result, tool_call_id=call.id),
        ]

    # -- long outputs ---------------------------------------------------------------------------

    def listing(self) -> str:
        lines = [f"src/{PROJECT}/__init__.py"] + [f"src/{PROJECT}/{m}.py" for m in MODULES]
        lines += [f"tests/test_{m}.py" for m in MODULES]
        lines += [
            f"tests/fixtures/{w}_{i:02d}.json" for i, w in enumerate(self.rng.sample(_WORDS, 12))
        ]
        lines += ["docs/index.md", "docs/cli.md", "pyproject.toml", "README.md", "CHANGELOG.md"]
        lines += [
            f"migrations/{i:04d}_{w}.sql" for i, w in enumerate(self.rng.sample(_WORDS, 8), 1)
        ]
        return "\n".join(lines)

    def code_lines(self, n: int) -> list[str]:
        rng = self.rng
        out = []
        for _ in range(n):
            a, b = rng.sample(_WORDS, 2)
            out.append(rng.choice((
                f"        {a} = {b}.{rng.choice(_WORDS)} or Decimal(0)",
                f"        if {a} is None:",
                f"            raise ValueError(f\"missing {a} for {{{b}!r}}\")",
                f"        {a}s.append(_{b}_of({a}))",
                f"        return {a}.quantize(CENT)",
            )))  # fmt: skip
        return out

    def source(self, path: str) -> str:
        # Seeded by path so that reading the same file twice shows the same text, as it would.
        rng = random.Random(f"{self.seed}:{path}")
        module = path.rsplit("/", 1)[-1].removesuffix(".py")
        lines = [
            f'"""{module.title()} handling for tallyho invoices and ledgers."""',
            "",
            "from __future__ import annotations",
            "",
            "from dataclasses import dataclass",
            "from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal",
            "",
            'CENT = Decimal("0.01")',
            "",
        ]
        for _ in range(rng.randint(5, 9)):
            name, arg = rng.sample(_WORDS, 2)
            lines += ["", f"def {module}_{name}({arg}, *, strict: bool = False):"]
            lines.append(f'    """Return the {name} of one {arg}, checked when strict."""')
            for _ in range(rng.randint(4, 10)):
                a, b = rng.sample(_WORDS, 2)
                lines.append(rng.choice((
                    f"    {a} = {arg}.{b}",
                    f"    if strict and not {a}:",
                    f"        raise ValueError(f\"{module}: no {a} on {{{arg}!r}}\")",
                    f"    {a} = Decimal(str({b})).quantize(CENT)",
                    f"    for {a} in {arg}.{b}s:",
                    f"        total += {a}.amount",
                )))  # fmt: skip
            lines.append(f"    return {name}")
        return "\n".join(f"{i:6d}\t{text}" for i, text in enumerate(lines, 1))

    def grep_hits(self, path: str) -> str:
        rng = self.rng
        hits = []
        for _ in range(rng.randint(8, 24)):
            module = rng.choice(MODULES)
            where = rng.choice((f"src/{PROJECT}/{module}.py", f"tests/test_{module}.py", path))
            a, b = rng.sample(_WORDS, 2)
            hits.append(f"{where}:{rng.randint(3, 240)}:    {a} = {module}_{b}({a}, strict=True)")
        return "\n".join(hits)

    def passing_log(self, target: str) -> str:
        rng = self.rng
        modules = [target] if target.endswith(".py") else [f"tests/test_{m}.py" for m in MODULES]
        lines = ["============================= test session starts ==============================",
                 "platform linux -- Python 3.11.9, pytest-8.2.0, pluggy-1.5.0",
                 "rootdir: /workspace/tallyho", "configfile: pyproject.toml",
                 f"collected {rng.randint(40, 400)} items", ""]  # fmt: skip
        count = 0
        for test_file in modules:
            dots = "".join(rng.choice("....................s") for _ in range(rng.randint(20, 60)))
            count += len(dots)
            lines.append(f"{test_file} {dots}")
        lines.append("")
        lines.append(f"{'=' * 30} {count} passed in {rng.uniform(0.4, 9.0):.2f}s {'=' * 30}")
        return "\n".join(lines)

    def failing_log(self, test_id: str, path: str, bug: _Bug) -> str:
        rng = self.rng
        test_file, test_name = test_id.split("::")
        line = rng.randint(30, 180)
        body = [
            "============================= test session starts ==============================",
            "platform linux -- Python 3.11.9, pytest-8.2.0, pluggy-1.5.0",
            f"collected {rng.randint(8, 40)} items",
            "",
            f"{test_file} ....F.......",
            "",
            "=================================== FAILURES ===================================",
            f"_____________________________ {test_name} _____________________________",
            "",
            f"    def {test_name}():",
        ]
        body += [f"    {text.strip()}" for text in self.code_lines(rng.randint(3, 8))]
        body += [
            f">       result = {bug.module}_{rng.choice(_WORDS)}(fixture, strict=True)",
            "",
            f"{test_file}:{line}: ",
            "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
            f"{path}:{rng.randint(20, 140)}: in {bug.module}_{rng.choice(_WORDS)}",
            f"    {bug.old}",
            f"E   {bug.error}",
            "",
            "=========================== short test summary info ============================",
            f"FAILED {test_id} - {bug.error}",
            f"{'=' * 25} 1 failed, 11 passed in {rng.uniform(0.2, 3.0):.2f}s {'=' * 25}",
        ]
        return "\n".join(body)

    def diff(self, path: str, bug: _Bug) -> str:
        rng = self.rng
        start = rng.randint(10, 200)
        context = self.code_lines(3)
        return "\n".join([
            f" {path} | 2 +-",
            " 1 file changed, 1 insertion(+), 1 deletion(-)",
            f"diff --git a/{path} b/{path}",
            f"index {rng.getrandbits(28):07x}..{rng.getrandbits(28):07x} 100644",
            f"--- a/{path}",
            f"+++ b/{path}",
            f"@@ -{start},7 +{start},7 @@ def {bug.module}_{rng.choice(_WORDS)}(",
            *(f" {c}" for c in context),
            f"-        {bug.old}",
            f"+        {bug.new}",
            *(f" {c}" for c in self.code_lines(3)),
        ])  # fmt: skip
