"""Redactors: functions that take secrets out of text before it leaves the process or is stored.

A `Redactor` takes text and returns it with secrets replaced. `redact_secrets` is the default.
The LLM summarizers run it on everything they send (`secrets-not-sent`), and a compactor given
``redact=`` runs it on every summary before it is stored (`summaries-redacted`). It replaces
with ``[redacted]``:

- tokens whose shape names their issuer: OpenAI and Anthropic keys, Stripe secret and restricted
  keys, GitHub, GitLab, Hugging Face, npm, Slack, SendGrid, Google and PyPI tokens, AWS access key
  ids, JSON web tokens, Slack webhook paths;
- private key blocks (PEM, OpenSSH, PGP), whole, or up to where a truncated one stops;
- the password of a URL (``postgresql://app:[redacted]@db``) and of ``mysql -p<password>``;
- the value of a bearer or basic ``Authorization`` credential;
- the value assigned to a name that says it is secret (``password``, ``secret``, ``token``,
  ``api_key``, ``AWS_SECRET_ACCESS_KEY``, ``"SecretAccessKey":``, ``--password=``), when the
  value looks like one: not a number, a path, a reference such as ``$TOKEN`` or a word of code.

Labels stay (``password=[redacted]``), and so does everything else: paths, hashes, UUIDs, ids
and error lines are not secrets. Every pattern is anchored where a run of its characters starts
and bounded in length, so a line costs time in proportion to its length, however it is built.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import pairwise

from ctxfold._memo import IdentityMemo, LineMemo
from ctxfold.messages import Message
from ctxfold.summarizers._lines import WRITTEN, sub_lines

Redactor = Callable[[str], str]
"""Takes text (a summary, a record to send) and returns it with secrets replaced."""

REDACTED = "[redacted]"

# Each alternative starts where a run of its own characters starts (the look-behind), so a long
# run is tried once, not at every position in it.
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-(?:ant-(?:api|admin)\d\d-|proj-|svcacct-|admin-|live-|test-)[A-Za-z0-9_-]{16,400}"
    r"|sk-(?=[A-Za-z_-]{0,200}\d)[A-Za-z0-9_-]{20,400}"  # a bare sk- key holds a digit
    r"|[rs]k_(?:live|test)_[A-Za-z0-9]{16,400}"
    r"|whsec_[A-Za-z0-9]{24,400}"
    r"|gh[pousr]_[A-Za-z0-9]{30,400}"
    r"|github_pat_[A-Za-z0-9_]{40,400}"
    r"|glpat-[A-Za-z0-9_-]{20,400}"
    r"|hf_[A-Za-z0-9]{30,400}"
    r"|npm_[A-Za-z0-9]{36,400}"
    r"|xox[abposre]-[A-Za-z0-9-]{10,400}"
    r"|SG\.[A-Za-z0-9_-]{16,64}\.[A-Za-z0-9_-]{16,128}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|pypi-AgE[A-Za-z0-9_-]{50,400}"
    r"|dop_v1_[a-f0-9]{64}"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}(?![A-Za-z0-9])"
    r"|eyJ[A-Za-z0-9_-]{8,4000}\.[A-Za-z0-9_-]{8,8000}\.[A-Za-z0-9_-]{8,4000}"
    r")"
)
_SLACK_HOOK = re.compile(r"(hooks\.slack\.com/(?:services|workflows)/)[A-Za-z0-9/_-]{10,300}")
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@?#]{0,128}:)([^\s@/?#]{1,256})@"
)
_AUTHORIZATION = re.compile(
    r"(?<![\w-])((?i:bearer|basic)[ \t]+|(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:Token|token|Bot|bot)[ \t]+)([A-Za-z0-9._~+/=-]{12,8000})"
)
_AUTHORIZATION_WORDS = ("bearer", "basic", "authorization")
"""One of these, in any case, is in every match of `_AUTHORIZATION`."""
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])([\w.-]{1,64})([\"']?[ \t]{0,16}[:=][ \t]{0,16}[\"']?)"
    r"([^\s\"'`,;&<>()\[\]{}]{1,4096})"
)
# A command-line flag with its value after a space: --password hunter22, --api-key sk-...
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]{0,40}[ \t]{1,16})([^\s'\"`-][^\s'\"`]{0,4095})")
_MYSQL = re.compile(r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb)\b")
_MYSQL_PASSWORD = re.compile(r"(?<![\w-])(-p)(['\"]?)([^\s'\"-][^\s'\"]{0,255})\2")
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"[ \t]*[A-Za-z0-9+/]{40,200}={0,2}[ \t]*\r?")
_PEM_TAIL = re.compile(r"[ \t]*(?:[A-Za-z0-9+/]{1,39}={0,2}|=[A-Za-z0-9+/]{4})[ \t]*\r?")
_PEM_HEADER = re.compile(r"[ \t]*[A-Za-z-]{1,40}: [^\n]{0,200}")
_PEM_SPAN = 64 * 1024
"""A private key block longer than this many characters is not one (RSA-16384 is ~13,000)."""

_WORD_SPLIT = re.compile(r"[_.\-]+|(?<=[a-z0-9])(?=[A-Z])")
_SECRET_WORDS = frozenset(
    {"password", "passwd", "pwd", "passphrase", "secret", "token", "credential", "credentials"}
)
_SECRET_PAIRS = frozenset(
    {"apikey", "accesskey", "privatekey", "accountkey", "authkey", "secretkey", "signingkey",
     "masterkey", "encryptionkey", "clientkey", "sessionkey", "authtoken", "apitoken"}
)  # fmt: skip
_SECRET_PARTS = ("pass", "pwd", "secret", "token", "credential", "key")
"""A piece of every word of `_SECRET_WORDS` and `_SECRET_PAIRS`: a name `_names_a_secret`
accepts holds one of them, lowered."""
_NUMBER = re.compile(r"[\d.,:+-]+")
_CODE_NAME = re.compile(r"[A-Za-z_]+|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_NOT_SECRETS = frozenset({"none", "null", "nil", "true", "false", "undefined", "required"})


def redact_secrets(text: str) -> str:
    """`text` with secrets replaced by ``[redacted]``; see the module for what counts.

    >>> redact_secrets("export OPENAI_API_KEY=sk-abcdefghij0123456789 and password=hunter22")
    'export OPENAI_API_KEY=[redacted] and password=[redacted]'
    >>> redact_secrets("psql postgresql://app:S3cr3t-pw@db:5432/prod -c 'select 1'")
    "psql postgresql://app:[redacted]@db:5432/prod -c 'select 1'"
    """
    if not text:
        return text
    if "-----BEGIN" in text:
        return _redact_whole(text)  # a key block spans lines
    # Every other pattern matches within one line and never makes or takes a newline, so a
    # text's redaction is its lines' redactions, one after another, and each line's is
    # remembered (`_LINES`): a summary repeats most lines of the ones before it.
    return "\n".join(_LINES.values(text))


def _redact_lines(lines: list[str]) -> list[str]:
    """The redactions of `lines` (no key block among them), made in one pass over them joined:
    one over the lines that read as ASCII (`_reads_as_ascii`) and one over the others, since a
    pass over other text cannot skip the lines that lack a secret's name (see
    `_redact_whole`)."""
    plain = [_reads_as_ascii(line) for line in lines]
    if not lines:
        return []
    if all(plain) or not any(plain):
        return _redact_whole("\n".join(lines)).split("\n")
    ascii_lines = iter(_redact_lines([line for line, a in zip(lines, plain, strict=True) if a]))
    others = iter(_redact_lines([line for line, a in zip(lines, plain, strict=True) if not a]))
    return [next(ascii_lines) if a else next(others) for a in plain]


_LINES: LineMemo[str] = LineMemo(_redact_lines)
"""The redactions of the lines redacted lately, by line (see `redact_secrets`)."""


def _redact_whole(text: str) -> str:
    """`redact_secrets` as one sequence of passes over the whole of `text`."""
    text = _redact_key_blocks(text)
    text = _TOKEN.sub(REDACTED, text)
    if "hooks.slack.com/" in text:
        text = _SLACK_HOOK.sub(rf"\1{REDACTED}", text)
    # A pass is skipped where a literal every match holds is absent: `in` costs a fraction of
    # a pass of the regex engine; and made over only the lines that hold one (`sub_lines`),
    # since every match lies within one line. The case-insensitive words are looked for in
    # lowered text only when it is ASCII, or ASCII but for the marks ctxfold writes
    # (`_reads_as_ascii`): elsewhere a letter such as "ſ" matches "s" without lowering to it.
    text = sub_lines(_URL_PASSWORD, _url_password, ("://",), text)
    if _reads_as_ascii(text):
        text = sub_lines(_AUTHORIZATION, _authorization, _AUTHORIZATION_WORDS, text, text.lower())
    else:
        text = _AUTHORIZATION.sub(_authorization, text)
    # An assignment or a flag is redacted only under a name that says it is secret, and every
    # such name holds one of `_SECRET_PARTS` once lowered: only the lines that do are passed
    # over (`sub_lines`). Lowering keeps the places of ASCII characters (and of the marks)
    # only; other text is passed over wherever an assignment or a flag can stand.
    if _reads_as_ascii(text):
        text = sub_lines(_ASSIGNMENT, _assignment, _SECRET_PARTS, text, text.lower())
        # Lowered again: a value redacted above changed the length of its line, and the lines
        # of the lowered text must stand where the text's do.
        text = sub_lines(_FLAG, _flag, _SECRET_PARTS, text, text.lower())
    else:
        text = sub_lines(_ASSIGNMENT, _assignment, (":", "="), text)
        text = sub_lines(_FLAG, _flag, ("-",), text)
    if ("mysql" in text or "mariadb" in text) and _MYSQL.search(text):
        text = "".join(_mysql_line(line) for line in text.splitlines(keepends=True))
    return text


def _reads_as_ascii(text: str) -> bool:
    """Whether `text` is ASCII but for the arrows, ellipses and dashes ctxfold writes into
    summaries (`WRITTEN`): none is a letter, a digit or "_", none has a case, and lowering
    leaves each where it stood, so the passes that look for a secret's name in lowered text
    find in such text what they find in ASCII text (summaries hold them on most lines)."""
    if text.isascii():
        return True
    for mark in WRITTEN:
        if mark in text:
            text = text.replace(mark, "")
    return text.isascii()


def redact_messages(
    messages: Sequence[Message], redact: Callable[[str], str] = redact_secrets
) -> list[Message]:
    """`messages` with `redact` applied to their text and their tool-call arguments: what a
    summarizer may read when secrets must stay out of summaries. Identifiers are then taken
    from the redacted text too, so restoring one can never put a secret back.

    >>> redact_messages([Message("user", "token ghp_0123456789abcdefghijABCDEFGHIJ012345")])[0].text
    'token [redacted]'
    """
    out: list[Message] = []
    for message in messages:
        calls = tuple(
            call if not call.arguments else replace(call, arguments=redact(call.arguments))
            for call in message.tool_calls
        )
        content = redact(message.content) if message.content else message.content
        if content == message.content and calls == message.tool_calls:
            out.append(message)
        else:
            out.append(message.replace(content=content, tool_calls=calls))
    return out


def redacted(message: Message, redact: Redactor = redact_secrets) -> Message:
    """`message` as `redact_messages` gives it, remembered for the message and the redactor
    (both by identity): the pipeline reads a message's redacted copy for its work ledger and
    again for each summary request, and redacts it once. `redact` must depend on its text
    alone, as `redact_secrets` does. The copy is the same object each time, so what is
    remembered about it by identity (its identifiers) is found again too."""
    return _REDACTED.get((message, redact), lambda: redact_messages([message], redact)[0])


_REDACTED: IdentityMemo[Message] = IdentityMemo(maxsize=65_536)


def redacted_all(messages: Sequence[Message], redact: Redactor = redact_secrets) -> list[Message]:
    """`redacted` of each of `messages`, those not redacted before redacted together
    (`redact_together`)."""
    redact_together(messages, redact)
    return [redacted(message, redact) for message in messages]


def redact_together(messages: Sequence[Message], redact: Redactor = redact_secrets) -> None:
    """Get `messages` ready for `redacted`: with `redact_secrets`, the new lines of those not
    redacted before are passed over together. Most messages are a few short lines, and a
    sequence of passes over each costs more in setting the passes up than in reading."""
    if redact is redact_secrets and len(messages) > 1:
        _LINES.learn(
            text
            for message in messages
            if not _REDACTED.holds((message, redact))
            for text in (message.content or "", *(call.arguments for call in message.tool_calls))
            if "-----BEGIN" not in text
        )


def _url_password(match: re.Match[str]) -> str:
    password = match.group(2)
    if not _looks_secret(password) and not password.isalpha():
        return match.group(0)
    if password.lower() in ("password", "pass", "passwd", "pwd", "secret"):
        return match.group(0)  # documentation's placeholder, not a password
    return f"{match.group(1)}{REDACTED}@"


def _authorization(match: re.Match[str]) -> str:
    value = match.group(2)
    if value.startswith(REDACTED) or not any(c.isdigit() for c in value):
        return match.group(0)  # "Bearer authentication", "Basic usage": words, not credentials
    return f"{match.group(1)}{REDACTED}"


def _assignment(match: re.Match[str]) -> str:
    name, separator, value = match.groups()
    if not _names_a_secret(name) or not _looks_secret(value):
        return match.group(0)
    return f"{name}{separator}{REDACTED}"


def _flag(match: re.Match[str]) -> str:
    flag, value = match.groups()
    if not _names_a_secret(flag.strip()) or not _looks_secret(value):
        return match.group(0)
    return f"{flag}{REDACTED}"


@functools.lru_cache(maxsize=4096)
def _names_a_secret(name: str) -> bool:
    """Whether a name such as ``AWS_SECRET_ACCESS_KEY``, ``clientSecret`` or ``--api-key`` says
    its value is a secret. Judged on the words of the name, so ``tokenizer`` or ``max_tokens``
    are not."""
    words = [w.lower() for w in _WORD_SPLIT.split(name) if w]
    if any(word in _SECRET_WORDS for word in words):
        return True
    joined = [*words, *(a + b for a, b in pairwise(words))]
    return any(word in _SECRET_PAIRS for word in joined)


def _looks_secret(value: str) -> bool:
    """Whether an assigned value may be a secret, rather than code, a number, a path or a
    reference to one kept elsewhere."""
    if len(value) < 6 or value.startswith(REDACTED) or value.lower() in _NOT_SECRETS:
        return False
    if value[0] in "$%{<*./~" or value.startswith(("env:", "os.", "self.", "settings.")):
        return False  # a reference to where the secret is kept, a path, a template
    if set(value) <= set("*xX•.-_"):
        return False  # already masked
    if _NUMBER.fullmatch(value):
        return False  # a number, a time, a version
    # Code: a word (password=password_field) or a dotted name (token=request.headers.get).
    return _CODE_NAME.fullmatch(value) is None


def _mysql_line(line: str) -> str:
    found = _MYSQL.search(line)
    if found is None:
        return line
    head, tail = line[: found.end()], line[found.end() :]
    return head + _MYSQL_PASSWORD.sub(rf"\1\2{REDACTED}\2", tail)


def _redact_key_blocks(text: str) -> str:
    """Replace each private key block, from its BEGIN line through its END line; a block with
    no END line (cut off by a pager or a clip) up to where its key-shaped lines stop."""
    begins = [m.span() for m in _PEM_BEGIN.finditer(text)]
    if not begins:
        return text
    ends = [m.end() for m in _PEM_END.finditer(text)]
    out: list[str] = []
    position = 0
    for start, header_end in begins:
        if start < position:
            continue  # inside a block already replaced
        later = bisect.bisect_left(ends, header_end)
        nxt = bisect.bisect_right(begins, (header_end, header_end))
        limit = begins[nxt][0] if nxt < len(begins) else len(text)
        if later < len(ends) and ends[later] <= min(limit, header_end + _PEM_SPAN):
            stop = ends[later]
        else:
            stop = _truncated_end(text, header_end, min(limit, header_end + _PEM_SPAN))
        out.append(text[position:start])
        out.append(REDACTED)
        position = stop
    out.append(text[position:])
    return "".join(out)


def _truncated_end(text: str, start: int, limit: int) -> int:
    """Where a key block with no END line stops, searching from `start` to `limit`: after its
    last key line. Key lines are long base64 lines, a short one right after them (the last of
    the body, or a PGP checksum), and headers such as ``Proc-Type: ...`` before the body; blank
    lines may stand between them. Anything else ends the block."""
    stop = start
    cursor = start
    after_body = False
    while cursor <= limit:
        newline = text.find("\n", cursor, limit)
        line_end = newline if newline >= 0 else limit
        line = text[cursor:line_end]
        if _PEM_BODY.fullmatch(line) or (after_body and _PEM_TAIL.fullmatch(line)):
            stop, after_body = line_end, True
        elif not after_body and _PEM_HEADER.fullmatch(line):
            stop = line_end
        elif line.strip():
            break
        else:
            after_body = False
        if newline < 0:
            break
        cursor = newline + 1
    return max(stop, start)
