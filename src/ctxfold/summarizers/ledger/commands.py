"""What a shell command does to files, and whether it runs tests.

`read_shell` reads one command string (as an agent sent it to a shell tool) and returns a
`ShellReading`: the file operations it makes, in order, and the test target when it runs a test
suite. Only forms whose effect is plain from the text count: ``sed -i``, redirections, ``tee``,
``mv``, ``cp``, ``rm``, ``touch``, ``git apply``/``checkout --``/``restore``, ``patch``, Python
scripts that open files for writing, SWE-agent's ``open``/``create``/``edit``, and reads such as
``cat``, ``head``, ``grep FILE``. Everything else (``ls``, ``find``, running a script) touches no
file as far as the ledger is concerned.

>>> [(op.kind, op.path) for op in read_shell("sed -n 1,9p a.py && mv b.py c.py").ops]
[('read', 'a.py'), ('delete', 'b.py'), ('create', 'c.py')]
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ctxfold.summarizers.ledger.shell import SimpleCommand, parse
from ctxfold.summarizers.ledger.testruns import PYTHONS, test_target
from ctxfold.summarizers.ledger.values import FileOp, OpKind

# Wrappers that run the rest of their words as the command.
_WRAPPERS = frozenset({"sudo", "time", "nohup", "nice", "command", "exec", "builtin", "stdbuf"})
_READERS = frozenset(
    {"cat", "head", "tail", "nl", "less", "more", "bat", "wc", "tac", "od", "xxd", "hexdump",
     "strings", "diff", "cmp", "view", "sort", "uniq", "cut", "file"}
)  # fmt: skip
_GREPS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep"})
# Options of these programs that take the next word as their value.
_VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "head": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "tail": frozenset({"-n", "-c", "--lines", "--bytes", "-s", "--pid"}),
    "nl": frozenset({"-b", "-n", "-s", "-v", "-w", "-i", "-l", "-d", "-f", "-h"}),
    "cut": frozenset({"-d", "-f", "-c", "-b"}),
    "sort": frozenset({"-k", "-t", "-o", "-S", "-T"}),
    "diff": frozenset({"-U", "-C", "-L", "--label", "-x", "-X", "-I"}),
    "grep": frozenset({"-e", "-f", "-m", "-A", "-B", "-C", "-d", "-D", "--max-count",
                       "--context", "--after-context", "--before-context"}),
    "rg": frozenset({"-e", "-f", "-m", "-A", "-B", "-C", "-g", "-t", "-T", "--glob", "--type",
                     "--max-count", "-j", "-M"}),
    "sed": frozenset({"-e", "-f", "-l", "--expression", "--file", "--line-length"}),
    "awk": frozenset({"-f", "-v", "-F", "--file", "--assign", "--field-separator"}),
    "tee": frozenset(),
    "touch": frozenset({"-d", "-t", "-r", "--date", "--reference"}),
    "cp": frozenset({"-t", "-S", "--target-directory", "--suffix"}),
    "mv": frozenset({"-t", "-S", "--target-directory", "--suffix"}),
    "patch": frozenset({"-p", "-i", "-o", "-d", "-r", "-B", "-D", "-F", "-V", "-z", "--input",
                        "--output", "--directory", "--strip"}),
    "git apply": frozenset({"-p", "-C", "--directory", "--exclude", "--include", "--whitespace"}),
}  # fmt: skip
_PY_WRITE = re.compile(
    r"""\bopen\(\s*(?P<q>['"])(?P<path>[^'"\n]+)(?P=q)\s*,\s*(?:mode\s*=\s*)?"""
    r"""(?P<m>['"])(?P<mode>[rwxabt+U]+)(?P=m)"""
)
_PY_WRITE_TEXT = re.compile(
    r"""\bPath\(\s*(?P<q>['"])(?P<path>[^'"\n]+)(?P=q)\s*\)\s*\.\s*write_(?:text|bytes)\("""
)
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_EXTENSION = re.compile(r"\.[A-Za-z0-9_]{1,10}$")
_PY_REMOVE = re.compile(r"""\bos\.(?:remove|unlink)\(\s*(?P<q>['"])(?P<path>[^'"\n]+)(?P=q)""")
_DIFF_OLD = re.compile(r"^--- (\S+)", re.MULTILINE)
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$")
_EDITOR_COMMANDS = {"view": "read", "create": "create", "str_replace": "modify",
                    "insert": "modify", "undo_edit": "modify", "append": "modify"}  # fmt: skip


@dataclass(frozen=True)
class ShellReading:
    """What `read_shell` found in one shell command.

    - `ops`: file operations in the order the command makes them;
    - `test`: ``"pytest tests/test_x.py"``-like key naming the runner and its targets, when the
      command runs tests (two runs with the same key test the same thing);
    - `single`: the command is one simple command (besides ``cd``), so a failure means its file
      operations did not happen;
    - `no_match_exit`: its last program is a search (grep, diff) whose exit status 1 means
      "nothing found", not a failure.
    """

    ops: tuple[FileOp, ...]
    test: str | None
    single: bool
    no_match_exit: bool


def read_shell(command: str) -> ShellReading:
    """The file operations and the test run of one shell command string."""
    first_line = command.lstrip().split("\n", 1)[0]
    if first_line.split(" ", 1)[0] == "edit":
        # SWE-agent: the lines after `edit N:M` are the new text, not commands.
        return ShellReading((FileOp(None, "modify", "edit"),), None, True, False)
    commands = parse(command)
    ops: list[FileOp] = []
    test: str | None = None
    cwd = ""
    working = 0
    last = ""
    for simple in commands:
        words = _unwrap(simple.words)
        program = posixpath.basename(words[0]) if words else ""
        if program == "cd":
            cwd = _cd(cwd, words[1:])
            continue
        working += 1
        last = program
        found = list(_program_ops(program, words, simple))
        found += _redirect_ops(simple.redirects)
        ops += [_relative_to(op, cwd) for op in found]
        test = test or test_target(program, words)
    return ShellReading(tuple(ops), test, working <= 1, last in _GREPS or last in ("diff", "cmp"))


def editor_ops(command: str, path: str) -> list[FileOp]:
    """The operation of an editor tool call (``view``, ``create``, ``str_replace``, ``insert``)."""
    kind = _EDITOR_COMMANDS.get(command)
    if kind is None or not _pathlike(path):
        return []
    return [FileOp(_clean(path), _as_kind(kind), f"editor {command}")]


def patch_ops(text: str, via: str, strip_prefix: bool = True) -> list[FileOp]:
    """The files a unified diff or an ``*** Begin Patch`` block changes."""
    out: list[FileOp] = []
    if "*** Begin Patch" in text or "*** Update File:" in text or "*** Add File:" in text:
        updated = None
        for line in text.splitlines():
            match = _PATCH_FILE.match(line)
            if not match:
                continue
            if match.group(3):
                if updated is not None:
                    out.append(FileOp(updated, "delete", via))
                out.append(FileOp(_clean(match.group(3)), "create", via))
            else:
                updated = _clean(match.group(2)) if match.group(1) == "Update" else None
                verb = {"Add": "create", "Update": "modify", "Delete": "delete"}[match.group(1)]
                out.append(FileOp(_clean(match.group(2)), _as_kind(verb), via))
        return out
    lines = text.splitlines()
    for index, line in enumerate(lines[:-1]):
        old = _DIFF_OLD.match(line)
        new = lines[index + 1]
        if not old or not new.startswith("+++ "):
            continue
        before = old.group(1)
        after = new[4:].split("\t")[0].strip()
        if after == "/dev/null":
            target, kind = before, "delete"
        elif before == "/dev/null":
            target, kind = after, "create"
        else:
            target, kind = after, "modify"
        if strip_prefix and target[:2] in ("a/", "b/"):
            target = target[2:]
        if _pathlike(target):
            out.append(FileOp(_clean(target), _as_kind(kind), via))
    return out


def script_ops(script: str, via: str) -> list[FileOp]:
    """Best effort: the files a Python script opens for writing or removes (literal paths only)."""
    found: list[tuple[int, FileOp]] = []
    for match in _PY_WRITE.finditer(script):
        mode = match.group("mode")
        if not any(c in mode for c in "wxa+"):
            continue
        kind: OpKind = "create" if ("w" in mode or "x" in mode) else "modify"
        found.append((match.start(), FileOp(_clean(match.group("path")), kind, via)))
    for match in _PY_WRITE_TEXT.finditer(script):
        found.append((match.start(), FileOp(_clean(match.group("path")), "create", via)))
    for match in _PY_REMOVE.finditer(script):
        found.append((match.start(), FileOp(_clean(match.group("path")), "delete", via)))
    return [op for _, op in sorted(found, key=lambda item: item[0]) if _pathlike(op.path or "")]


def _unwrap(words: list[str]) -> list[str]:
    """Drop variable assignments and wrappers (``sudo``, ``env X=1``, ``timeout 60``)."""
    i = 0
    while i < len(words):
        word = words[i]
        if _ASSIGNMENT.match(word):
            i += 1
        elif word in _WRAPPERS or word == "env":
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
        elif word == "timeout":
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
            i += 1  # the duration
        else:
            break
    return words[i:]


def _cd(cwd: str, args: list[str]) -> str:
    # Only a relative cd is followed: paths after `cd /testbed` are left as the agent wrote them,
    # since the same files are named relative to the repository everywhere else.
    target = next((a for a in args if not a.startswith("-")), "")
    if not target or target.startswith(("/", "~", "$")) or cwd.startswith("/"):
        return "/"  # somewhere the text does not say
    return posixpath.normpath(posixpath.join(cwd, target))


def _relative_to(op: FileOp, cwd: str) -> FileOp:
    if not cwd or cwd == "/" or op.path is None or op.path.startswith(("/", "~")):
        return op
    return FileOp(posixpath.normpath(posixpath.join(cwd, op.path)), op.kind, op.via, op.opens)


def _program_ops(program: str, words: list[str], simple: SimpleCommand) -> Iterator[FileOp]:
    args = words[1:]
    if program in ("sed", "gsed"):
        yield from _sed(args)
    elif program in _READERS:
        for path in _operands(args, _VALUE_OPTIONS.get(program, frozenset())):
            yield FileOp(path, "read", program)
    elif program in _GREPS:
        yield from _grep(program, args)
    elif program in ("awk", "gawk"):
        yield from _awk(args)
    elif program == "tee":
        append = any(a in ("-a", "--append") for a in args)
        for path in _operands(args, frozenset()):
            yield FileOp(path, "modify" if append else "create", "tee -a" if append else "tee")
    elif program == "touch":
        for path in _operands(args, _VALUE_OPTIONS["touch"]):
            yield FileOp(path, "create", "touch")
    elif program in ("rm", "unlink"):
        for path in _operands(args, frozenset()):
            yield FileOp(path, "delete", program)
    elif program in ("mv", "cp"):
        yield from _move_or_copy(program, args)
    elif program == "patch":
        yield from _patch(args, simple)
    elif program == "git":
        yield from _git(args, simple)
    elif PYTHONS.match(program):
        yield from _python(args, simple)
    elif program == "open" and args:
        yield FileOp(_clean(args[0]), "read", "open", opens=True)
    elif program == "create" and args:
        yield FileOp(_clean(args[0]), "create", "create", opens=True)
    elif program == "search_file" and len(args) >= 2:
        yield FileOp(_clean(args[1]), "read", "search_file")
    elif program in ("str_replace_editor", "str_replace_based_edit_tool") and len(args) >= 2:
        yield from editor_ops(args[0], args[1])


def _operands(args: Sequence[str], value_options: frozenset[str]) -> Iterator[str]:
    """The non-option arguments that name files, in order."""
    for arg in _positionals(args, value_options):
        if _pathlike(arg):
            yield _clean(arg)


def _positionals(args: Sequence[str], value_options: frozenset[str]) -> list[str]:
    """The non-option arguments, in order (values of `value_options` skipped)."""
    out: list[str] = []
    options_done = False
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif options_done:
            out.append(arg)
        elif arg == "--":
            options_done = True
        elif arg in value_options:
            skip = True
        elif not arg.startswith("-") or arg == "-":
            out.append(arg)
    return out


def _sed(args: list[str]) -> Iterator[FileOp]:
    in_place = False
    script_given = False
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-e", "--expression", "-f", "--file"):
            script_given = True
            i += 2
            continue
        if arg.startswith(("--expression=", "--file=")):
            script_given = True
        elif arg in ("-i", "--in-place") or arg.startswith(("--in-place=", "-i")):
            in_place = True
            # BSD sed takes the backup suffix as its own word: `sed -i '' 's/a/b/' f`.
            if arg == "-i" and i + 1 < len(args) and args[i + 1] == "":
                i += 1
        elif arg.startswith("-") and len(arg) > 1 and not arg.startswith("--"):
            in_place = in_place or "i" in arg[1:]
            if arg[1:].endswith(("e", "f")):
                script_given = True
                i += 1  # -ne 'script'
        elif arg == "--":
            positional += args[i + 1 :]
            break
        elif not arg.startswith("--"):
            positional.append(arg)
        i += 1
    files = positional if script_given else positional[1:]
    kind: OpKind = "modify" if in_place else "read"
    for path in files:
        if _pathlike(path):
            yield FileOp(_clean(path), kind, "sed -i" if in_place else "sed")


def _grep(program: str, args: list[str]) -> Iterator[FileOp]:
    values = _VALUE_OPTIONS["rg" if program == "rg" else "grep"]
    pattern_given = any(a in ("-e", "-f", "--regexp", "--file") for a in args)
    recursive = program in ("rg", "ag", "ack") or any(
        a in ("-r", "-R", "--recursive") or (a[:1] == "-" and a[1:2] != "-" and set("rR") & set(a))
        for a in args
    )
    operands = _positionals(args, values)
    if not pattern_given:
        operands = operands[1:]  # the first one is the pattern
    for path in operands:
        # Searched directories are scopes, not files read.
        if _pathlike(path) and not (recursive and not _has_extension(path)):
            yield FileOp(_clean(path), "read", program)


def _awk(args: list[str]) -> Iterator[FileOp]:
    in_place = "inplace" in args
    operands = [a for a in _positionals(args, _VALUE_OPTIONS["awk"]) if a != "inplace"]
    if not any(a in ("-f", "--file") for a in args):
        operands = operands[1:]  # the first one is the awk program
    for path in operands:
        if _pathlike(path) and "=" not in path:
            yield FileOp(_clean(path), "modify" if in_place else "read", "awk")


def _move_or_copy(program: str, args: list[str]) -> Iterator[FileOp]:
    target_dir = None
    for i, arg in enumerate(args):
        if arg in ("-t", "--target-directory") and i + 1 < len(args):
            target_dir = args[i + 1]
        elif arg.startswith("--target-directory="):
            target_dir = arg.split("=", 1)[1]
    operands = list(_operands(args, _VALUE_OPTIONS[program]))
    if target_dir is None:
        if len(operands) < 2:
            return
        *sources, destination = operands
    else:
        sources, destination = operands, _clean(target_dir)
    into_dir = (
        target_dir is not None
        or len(sources) > 1
        or destination in (".", "..")
        or args[-1].endswith("/")
        or (_has_extension(sources[0]) and not _has_extension(destination))
    )
    for source in sources:
        target = (
            _clean(posixpath.join(destination, posixpath.basename(source)))
            if into_dir
            else destination
        )
        yield FileOp(source, "delete" if program == "mv" else "read", program)
        yield FileOp(target, "create", program)


def _patch(args: list[str], simple: SimpleCommand) -> Iterator[FileOp]:
    if "--dry-run" in args:
        return
    strip = any(a.startswith("-p") and a not in ("-p0",) for a in args) or "-p" in args
    operands = list(_operands(args, _VALUE_OPTIONS["patch"]))
    for i, arg in enumerate(args):
        if arg in ("-i", "--input") and i + 1 < len(args):
            yield FileOp(_clean(args[i + 1]), "read", "patch")
    if operands:
        yield FileOp(operands[0], "modify", "patch")
        return
    for body in simple.stdin:
        yield from patch_ops(body, "patch", strip_prefix=strip)


def _git(args: list[str], simple: SimpleCommand) -> Iterator[FileOp]:
    # Global options such as `-C dir` come before the subcommand.
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-C", "-c", "--git-dir", "--work-tree") else 1
    if i >= len(args):
        return
    sub, rest = args[i], args[i + 1 :]
    if sub == "apply":
        if any(a in ("--check", "--stat", "--numstat", "--summary") for a in rest):
            return
        operands = list(_operands(rest, _VALUE_OPTIONS["git apply"]))
        for path in operands:
            yield FileOp(path, "read", "git apply")
        for body in simple.stdin:
            yield from patch_ops(body, "git apply")
    elif sub in ("checkout", "restore"):
        if sub == "restore" and "--staged" in rest and "--worktree" not in rest:
            return
        if "--" in rest:
            paths = [_clean(p) for p in rest[rest.index("--") + 1 :] if _pathlike(p)]
        elif sub == "restore":
            paths = list(_operands(rest, frozenset({"-s", "--source"})))
        else:  # `git checkout file.py` restores a file; `git checkout main` switches branches
            paths = [p for p in _operands(rest, frozenset({"-b", "-B"})) if _has_extension(p)]
        for path in paths:
            yield FileOp(path, "modify", f"git {sub}")
    elif sub == "rm":
        for path in _operands(rest, frozenset()):
            yield FileOp(path, "delete", "git rm")
    elif sub == "mv":
        for op in _move_or_copy("mv", rest):
            yield FileOp(op.path, op.kind, "git mv")


def _python(args: list[str], simple: SimpleCommand) -> Iterator[FileOp]:
    for i, arg in enumerate(args):
        if arg == "-c" and i + 1 < len(args):
            yield from script_ops(args[i + 1], "python -c")
            return
        if arg == "-m" or (not arg.startswith("-") and arg != "-"):
            return  # a module or a script file: what it writes is not in the text
    for body in simple.stdin:
        yield from script_ops(body, "python script")


def _redirect_ops(redirects: Iterable[tuple[str, str]]) -> Iterator[FileOp]:
    for operator, target in redirects:
        bare = operator.lstrip("0123456789")
        if bare in (">&", "<&") and (target.isdigit() or target == "-"):
            continue  # 2>&1 duplicates a descriptor
        if target.startswith("/dev/") or not _pathlike(target):
            continue
        if bare in (">", ">|", "&>", ">&"):
            yield FileOp(_clean(target), "create", ">")
        elif bare in (">>", "&>>"):
            yield FileOp(_clean(target), "modify", ">>")
        elif bare == "<":
            yield FileOp(_clean(target), "read", "<")


def _pathlike(text: str) -> bool:
    return (
        bool(text)
        and len(text) <= 500
        and text != "-"
        and "\n" not in text
        and "\x00" not in text
        and "$" not in text
        and "`" not in text
        and "://" not in text
    )


def _has_extension(path: str) -> bool:
    return _EXTENSION.search(posixpath.basename(path.rstrip("/"))) is not None


def _clean(path: str) -> str:
    """One spelling per file: ``./a//b.py`` is ``a/b.py``; a trailing slash is dropped."""
    path = path.strip()
    if path.startswith("~"):
        return path
    cleaned = posixpath.normpath(path) if path else path
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def _as_kind(kind: str) -> OpKind:
    if kind == "read":
        return "read"
    if kind == "create":
        return "create"
    if kind == "delete":
        return "delete"
    return "modify"
