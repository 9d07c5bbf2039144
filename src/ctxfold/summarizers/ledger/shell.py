"""Shell command text as a list of simple commands, quoting respected, never an exception.

Agents send shell commands as one string: chains (``&&``, ``||``, ``;``, ``|``, newlines),
quotes, redirections and heredocs (``cat <<'EOF' > file``). `parse` splits such a string into
`SimpleCommand`s: the words with their quotes removed, the redirections with their targets, and
the heredoc bodies. It is a reader, not a shell: nothing is expanded, and text it cannot make
sense of (an unbalanced quote, a stray operator) still yields words rather than an error, because
the ledger must be built from whatever an agent typed.

>>> [c.words for c in parse("cd src && sed -i 's/a b/c/' 'my file.py' | tee -a log.txt")]
[['cd', 'src'], ['sed', '-i', 's/a b/c/', 'my file.py'], ['tee', '-a', 'log.txt']]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Longest first, so that "&&" is not read as two "&" and "<<-" not as "<<" and "-".
_OPERATORS = (
    "<<<", "<<-", "&>>", "&&", "||", ";;", "|&", "&>", ">>", ">&", ">|", "<<", "<&", "<>",
    ">", "<", "|", ";", "&", "(", ")",
)  # fmt: skip
_REDIRECTIONS = frozenset({"<<<", "<<-", "&>>", "&>", ">>", ">&", ">|", "<<", "<&", "<>", ">", "<"})
_PLAIN = re.compile(r"[^\s\\'\"$`#<>|;&()]+")
_SEPARATORS = frozenset({"&&", "||", ";;", "|&", "|", ";", "&", "(", ")", "\n"})
# Words that open or close a compound command; what follows them is a command of its own.
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!", "esac"}
)


@dataclass
class SimpleCommand:
    """One command of a chain: its words, redirections and heredoc bodies.

    - `words`: the program and its arguments, quotes removed, nothing expanded;
    - `redirects`: ``(operator, target)`` pairs, the operator with its file descriptor
      (``"2>"``, ``">>"``, ``"<"``);
    - `stdin`: heredoc and here-string bodies given to the command, in order;
    - `piped`: whether its input comes from the previous command of a pipeline.
    """

    words: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    stdin: list[str] = field(default_factory=list)
    piped: bool = False


@dataclass
class _Token:
    kind: str  # "word", "op" or "heredoc"
    text: str


def parse(command: str) -> list[SimpleCommand]:
    """The simple commands of `command`, in order. Compound-command keywords (``if``, ``then``,
    ``do``, ``{`` ...) are dropped so that the commands inside them are seen; ``for`` and
    ``case`` headers are skipped."""
    out: list[SimpleCommand] = []
    current = SimpleCommand()
    tokens = _tokenize(command)
    index = 0
    piped = False
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if token.kind == "op" and token.text in _SEPARATORS:
            _close(current, out)
            piped = token.text in ("|", "|&")
            current = SimpleCommand(piped=piped)
            continue
        if token.kind == "op":
            operator = token.text
            target = tokens[index] if index < len(tokens) else None
            if target is not None and target.kind != "op":
                index += 1
                if target.kind == "heredoc" or operator.lstrip("0123456789") == "<<<":
                    current.stdin.append(target.text)
                else:
                    current.redirects.append((operator, target.text))
            continue
        if token.kind == "heredoc":  # a delimiter with no operator before it cannot happen
            current.stdin.append(token.text)
            continue
        current.words.append(token.text)
    _close(current, out)
    return out


def _close(command: SimpleCommand, out: list[SimpleCommand]) -> None:
    words = command.words
    while words and words[0] in _KEYWORDS:
        words.pop(0)
    if words and words[0] in ("for", "case", "select", "function"):
        words.clear()
    if words or command.redirects or command.stdin:
        out.append(command)


def _tokenize(text: str) -> list[_Token]:
    """Words, operators and heredoc bodies; a single pass, linear in the length of `text`."""
    tokens: list[_Token] = []
    buf: list[str] = []
    in_word = False
    # Heredocs whose delimiter has been read; their bodies start after the next newline.
    pending: list[tuple[int, str, bool]] = []
    expect_delimiter: bool | None = None  # the strip-tabs flag of a "<<" waiting for its word
    n = len(text)
    i = 0

    def flush() -> None:
        nonlocal in_word, expect_delimiter
        if not in_word:
            return
        word = "".join(buf)
        buf.clear()
        in_word = False
        if expect_delimiter is not None:
            pending.append((len(tokens), word, expect_delimiter))
            tokens.append(_Token("heredoc", ""))
            expect_delimiter = None
        else:
            tokens.append(_Token("word", word))

    while i < n:
        plain = _PLAIN.match(text, i)
        if plain:  # a run of ordinary characters in one step: the common case
            buf.append(plain.group())
            in_word = True
            i = plain.end()
            continue
        c = text[i]
        if c == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                i += 2  # a line continuation joins the two lines
                continue
            buf.append(text[i + 1] if i + 1 < n else c)
            in_word = True
            i += 2
            continue
        if c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            buf.append(text[i + 1 : end])
            in_word = True
            i = end + 1
            continue
        if c == '"':
            i = _double_quoted(text, i + 1, buf)
            in_word = True
            continue
        if c == "$" and i + 1 < n and text[i + 1] in "({":
            end = _matching_close(text, i + 1)
            buf.append(text[i:end])
            in_word = True
            i = end
            continue
        if c == "`":
            end = text.find("`", i + 1)
            end = n if end < 0 else end + 1
            buf.append(text[i:end])
            in_word = True
            i = end
            continue
        if c == "#" and not in_word:
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in " \t\r":
            flush()
            i += 1
            continue
        if c == "\n":
            flush()
            tokens.append(_Token("op", "\n"))
            i += 1
            for position, delimiter, strip_tabs in pending:
                body, i = _heredoc_body(text, i, delimiter, strip_tabs)
                tokens[position] = _Token("heredoc", body)
            pending.clear()
            continue
        operator = (
            next((op for op in _OPERATORS if text.startswith(op, i)), None)
            if c in "<>|;&()"
            else None
        )
        if operator is None:
            buf.append(c)
            in_word = True
            i += 1
            continue
        prefix = ""
        if operator in _REDIRECTIONS and in_word and "".join(buf).isdigit():
            prefix = "".join(buf)  # "2>" is one operator, not the word "2" and ">"
            buf.clear()
            in_word = False
        flush()
        tokens.append(_Token("op", prefix + operator))
        if operator in ("<<", "<<-"):
            expect_delimiter = operator == "<<-"
        i += len(operator)
    flush()
    return tokens


def _double_quoted(text: str, i: int, buf: list[str]) -> int:
    """Read a double-quoted string from `i` (after the quote); returns the index after it."""
    n = len(text)
    while i < n and text[i] != '"':
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in '"\\$`\n':
            if text[i + 1] != "\n":
                buf.append(text[i + 1])
            i += 2
            continue
        if c == "$" and i + 1 < n and text[i + 1] == "(":
            end = _matching_close(text, i + 1)
            buf.append(text[i:end])
            i = end
            continue
        buf.append(c)
        i += 1
    return i + 1


def _matching_close(text: str, i: int) -> int:
    """The index after the bracket that closes the one at `i`, skipping quoted text; the end of
    the text when it is never closed."""
    opening = text[i]
    closing = ")" if opening == "(" else "}"
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c in "'\"":
            end = text.find(c, i + 1)
            i = n if end < 0 else end + 1
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _heredoc_body(text: str, i: int, delimiter: str, strip_tabs: bool) -> tuple[str, int]:
    """The body of a heredoc starting at `i`, and the index after its closing delimiter line
    (the end of the text when the delimiter never comes)."""
    lines: list[str] = []
    n = len(text)
    while i < n:
        end = text.find("\n", i)
        line_end = n if end < 0 else end
        line = text[i:line_end]
        i = n if end < 0 else end + 1
        candidate = line.rstrip("\r")
        if strip_tabs:
            candidate = candidate.lstrip("\t")
        if candidate == delimiter:
            return "\n".join(lines), i
        lines.append(line)
    return "\n".join(lines), n
