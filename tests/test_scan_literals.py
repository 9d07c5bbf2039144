"""The identifier scan and the redactor skip a pattern's pass over a text that lacks a literal
every match of the pattern holds. These tests hold each pattern to its literals, so a pattern
changed later without its literals cannot silently stop finding identifiers or secrets."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxfold.messages import Message
from ctxfold.summarizers import _lines, identifiers, redact
from ctxfold.summarizers.ledger import build, testruns

# Pieces that make the patterns match: the literals themselves, pieces of them, and the
# characters around identifiers, so generated texts hold matches and near-misses alike.
_PIECES = [
    "://", ":/", "http", "https", "ftp", "file", "www.example.com/x", "-", "--", "2024", "05",
    "15", "T10:20", "sed", "sed -n ", "'1,5p'", "s/", "/old/new/", "call_", "toolu_", "abcdef12",
    "@", "a.b", "C:\\", "\\dir", "/", "src/app.py", "./x", "~/y", ".", ".py", ".json", ":12",
    "JIRA", "-123", "#", "#42", "_", "user_42", "deadbeef1", "ABC12", "Error", "ValueError",
    "Exception", "Warning", "Exit", "Interrupt", "error", "ERROR", "fatal", "FATAL", "panic",
    "FAILED", ": ", "command not found", "No such file or directory", "Permission denied",
    "$", "$ ls -la", "\n", " ", "\t", "x", "Z", "9", "é", "ſ", "ı", "bearer", "Bearer ", "BASIC ",
    "basic", "Authorization", "authorization: token ", "0123456789abcdefXYZ", "mysql", "mariadb",
    " -p", "hunter22", "db://u:", "pw1234@h",
]  # fmt: skip
_EXAMPLES = [
    "see https://example.com/a", "at 2024-05-15T10:20", "sed -n '1,5p' f", "s/old/new/g",
    "call_abcdef123", "123e4567-e89b-12d3-a456-426614174000", "a@b.example", "C:\\dir\\f.txt",
    "src/app/main.py", "main.py", "JIRA-123", "fixes #42", "user_42", "ValueError: bad value",
    "error: no such option", "FAILED tests/test_a.py::test_b", "ls: x: Permission denied",
    "$ make test", "Authorization: Bearer abcdef1234567890", "postgresql://app:S3cret-pw@db/x",
    "mysql -phunter22 db", "https://hooks.slack.com/services/T0001/B0001/abcdefghij0123",
]  # fmt: skip
_TEXTS = st.lists(st.sampled_from(_PIECES + _EXAMPLES), max_size=24).map("".join)


def _holds_literal(pattern: re.Pattern[str], needs: tuple[str, ...], text: str) -> bool:
    return not needs or pattern.search(text) is None or any(n in text for n in needs)


@settings(max_examples=400)
@given(_TEXTS)
def test_every_identifier_pattern_match_holds_one_of_its_literals(text: str) -> None:
    """A text the scan skips for a pattern is one where the pattern finds nothing."""
    for pattern, _kind, _accept, needs in identifiers._SPAN_PATTERNS:
        assert _holds_literal(pattern, needs, text), pattern.pattern
    assert _holds_literal(identifiers._ERROR_LINE, identifiers._ERROR_WORDS, text)
    assert _holds_literal(identifiers._PROMPT_LINE, ("$",), text)


@settings(max_examples=400)
@given(_TEXTS)
def test_every_skipped_redaction_pass_would_have_found_nothing(text: str) -> None:
    """A redaction pass is skipped only where its pattern finds nothing."""
    assert _holds_literal(redact._URL_PASSWORD, ("://",), text)
    assert _holds_literal(redact._SLACK_HOOK, ("hooks.slack.com/",), text)
    assert _holds_literal(redact._MYSQL, ("mysql", "mariadb"), text)
    if text.isascii():
        assert _holds_literal(redact._AUTHORIZATION, redact._AUTHORIZATION_WORDS, text.lower())


@settings(max_examples=400)
@given(st.lists(st.sampled_from([*_PIECES, *_EXAMPLES, "\n", "\n\n"]), max_size=40).map("".join))
def test_every_identifier_pattern_match_holds_one_of_its_literals_on_its_line(text: str) -> None:
    """A line the scan skips for a pattern is one where the pattern finds nothing, and the scan
    over the lines it keeps finds exactly what one pass over the whole text finds."""
    patterns = [(p, needs) for p, _kind, _accept, needs in identifiers._SPAN_PATTERNS]
    patterns += [(identifiers._ERROR_LINE, identifiers._ERROR_WORDS)]
    patterns += [(identifiers._PROMPT_LINE, ("$",))]
    for pattern, needs in patterns:
        whole = [(m.span(), m.group(0)) for m in pattern.finditer(text)]
        kept = [(m.span(), m.group(0)) for m in _lines.matches(pattern, needs, text)]
        assert kept == whole, pattern.pattern
        for (start, end), _found in whole:
            line_start = text.rfind("\n", 0, start) + 1
            line_end = text.find("\n", end)
            line = text[line_start : line_end if line_end >= 0 else len(text)]
            assert not needs or any(n in line for n in needs), pattern.pattern


def test_the_literals_are_not_vacuous() -> None:
    """Each pattern with literals does find something in a text that holds them."""
    for pattern, _kind, _accept, needs in identifiers._SPAN_PATTERNS:
        if needs:
            assert any(pattern.search(text) for text in _EXAMPLES), pattern.pattern
    assert identifiers.error_lines("ValueError: bad value") == ["ValueError: bad value"]
    assert redact.redact_secrets("Authorization: Bearer abcdef1234567890") == (
        "Authorization: Bearer [redacted]"
    )


_LINED_TEXTS = st.lists(st.sampled_from([*_PIECES, *_EXAMPLES, "\n", "\r\n", "\n\n"]), max_size=40)


@settings(max_examples=400)
@given(_LINED_TEXTS, st.integers(min_value=0, max_value=40))
def test_no_identifier_pattern_crosses_a_line_so_lines_scan_alone(
    pieces: list[str], seen_before: int
) -> None:
    """The identifiers of a text, scanned line by line with the lines met before remembered,
    are exactly those one pass over the whole text finds, in the same order: no pattern
    matches across a newline, and a remembered line gives what scanning it again would."""
    text = "".join(pieces)
    whole = [found for _start, found in identifiers._scan_span(text)]
    # Some of its lines already met (in another text), the rest new.
    earlier = "\n".join(text.split("\n")[:seen_before])
    list(identifiers._scan_text(earlier))
    assert list(identifiers._scan_text(text)) == whole
    assert list(identifiers._scan_text(text)) == whole  # every line remembered now
    for line in text.split("\n"):
        assert list(identifiers._scan_text(line)) == [
            found for _start, found in identifiers._scan_span(line)
        ]


_PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq0jcaIwJcPBmoQTEJQoX4v0PZ1Gg\n"
_SECRET_TEXTS = st.lists(
    st.sampled_from([*_PIECES, *_EXAMPLES, "\n", "\r\n", "=", "password=", "--token ", _PEM]),
    max_size=40,
)


@settings(max_examples=400)
@given(_SECRET_TEXTS, st.integers(min_value=0, max_value=40))
def test_redacting_line_by_line_gives_what_one_pass_over_the_text_gives(
    pieces: list[str], seen_before: int
) -> None:
    """A text redacted with some of its lines met before (and remembered) comes out exactly
    as one sequence of passes over the whole text makes it: no redaction pattern but the key
    blocks' crosses a newline, and those are redacted over the whole text."""
    text = "".join(pieces)
    redact.redact_secrets("\n".join(text.split("\n")[:seen_before]))
    assert redact.redact_secrets(text) == redact._redact_whole(text)
    assert redact.redact_secrets(text) == redact._redact_whole(text)


# Assignments and flags with and without secret values, on several lines.
_ASSIGNED = st.lists(
    st.sampled_from(
        ["password=", "api_key: ", '"token": "', "--password ", "--api-key=", "-p", "hunter22",
         "PASSWORD=", "API_KEY=", "ApiKey: ", "clientSecret=", "AUTH_TOKEN=", "db_pwd=",
         "Credentials: ", "--Secret ", "passphrase:", "max_tokens=", "monkey=", "\u212aEY=",
         "S3cr3t-pw!", "$TOKEN", "1.2.3", "x", " ", "\t", "\n", "\n", "-", ":", "=", "é"]
    ),
    max_size=40,
).map("".join)  # fmt: skip


@settings(max_examples=400)
@given(st.one_of(_SECRET_TEXTS.map("".join), _ASSIGNED))
def test_assignments_and_flags_redacted_line_by_line_as_over_the_whole_text(text: str) -> None:
    """The assignment and flag passes, made over only the lines that can hold what they
    replace (a secret's name, lowered, in ASCII text; else ``:``, ``=`` or ``-``), replace
    exactly what a pass over the whole text replaces."""
    for pattern, replace, needs in (
        (redact._ASSIGNMENT, redact._assignment, (":", "=")),
        (redact._FLAG, redact._flag, ("-",)),
    ):
        whole = pattern.sub(replace, text)
        assert _lines.sub_lines(pattern, replace, needs, text) == whole
        if text.isascii():
            lowered = text.lower()
            gated = _lines.sub_lines(pattern, replace, redact._SECRET_PARTS, text, lowered)
            assert gated == whole
        for match in pattern.finditer(text):
            line_start = text.rfind("\n", 0, match.start()) + 1
            line_end = text.find("\n", match.end())
            line = text[line_start : line_end if line_end >= 0 else len(text)]
            assert any(n in line for n in needs), pattern.pattern


@settings(max_examples=400)
@given(st.lists(st.sampled_from(["pass", "word", "api", "key", "Key", "_", "-", ".", "Secret",
                                 "TOKEN", "auth", "client", "Pwd", "x", "\u212a", "ſ", "io"]),
                max_size=8).map("".join))  # fmt: skip
def test_every_secret_name_holds_a_secret_part(name: str) -> None:
    """A name the redactor takes as naming a secret holds one of `_SECRET_PARTS` once
    lowered (in ASCII), so a line without one has nothing the assignment or flag pass would
    replace."""
    if name.isascii() and redact._names_a_secret(name):
        assert any(part in name.lower() for part in redact._SECRET_PARTS), name
    for word in (*redact._SECRET_WORDS, *redact._SECRET_PAIRS):
        assert any(part in word for part in redact._SECRET_PARTS), word


# The plain forms of the patterns that start with their first character's class rather than
# with a word boundary (which lets the regex engine skip to where they can match).
_PLAIN_FORMS = {
    identifiers._UUID: (
        r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    ),
    identifiers._TICKET: r"\b[A-Z][A-Z0-9]+-\d+\b",
    identifiers._CODE: r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,20}\b",
    identifiers._TIMESTAMP: (
        r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    ),
    identifiers._HASH: r"\b[0-9a-f]{7,40}\b",
}  # fmt: skip
_WORDS = st.lists(
    st.sampled_from(
        ["a", "f", "Z", "K", "0", "9", "٣", "²", "é", "ǅ", "_", "-", ".", ":", "/", " ", "\n", "T",
         "deadbeef", "0123456", "ABC12", "X1Y2Z", "JIRA-12", "2024-05-15", "T10:20:30Z", "+02:00",
         "123e4567-e89b-12d3-a456-426614174000", "a.b.py:12", "x/y.py", "main.c", ".json", ".py",
         ".pyi", "py", "cfg", "h", "é.py", "-x.md", "~/a.txt", "a.py/b", "a.py-"]
    ),
    max_size=30,
).map("".join)  # fmt: skip


@settings(max_examples=600)
@given(_WORDS, st.integers(min_value=0, max_value=8))
def test_each_pattern_finds_what_its_plain_form_finds(text: str, start: int) -> None:
    """A pattern written to start with its first character's class finds exactly the matches
    of its plain form (``\\b`` before that class), from any position of any text."""
    for pattern, plain in _PLAIN_FORMS.items():
        expected = [(m.span(), m.group(0)) for m in re.compile(plain).finditer(text, start)]
        assert [(m.span(), m.group(0)) for m in pattern.finditer(text, start)] == expected, plain


@settings(max_examples=600)
@given(_WORDS)
def test_file_names_found_in_the_tokens_that_hold_an_extension_are_all_of_them(
    text: str,
) -> None:
    """File names found in only the tokens that hold an extension are exactly those one pass
    of the pattern over the whole text finds."""
    name = identifiers._FILE_NAME
    expected = [(m.span(), m.group(0)) for m in name.finditer(text)]
    gate = identifiers._TOKEN_GATES[name]
    assert [(m.span(), m.group(0)) for m in _lines.token_matches(name, gate, text)] == expected


@settings(max_examples=400)
@given(st.one_of(_SECRET_TEXTS.map("".join), _ASSIGNED))
def test_url_and_authorization_passes_over_their_lines_replace_what_whole_passes_do(
    text: str,
) -> None:
    """The URL password and authorization passes, made over only the lines that hold what
    every match holds (``://``; one of the authorization words, lowered, in ASCII text),
    replace exactly what a pass over the whole text replaces."""
    whole = redact._URL_PASSWORD.sub(redact._url_password, text)
    assert _lines.sub_lines(redact._URL_PASSWORD, redact._url_password, ("://",), text) == whole
    if text.isascii():
        words = redact._AUTHORIZATION_WORDS
        whole = redact._AUTHORIZATION.sub(redact._authorization, text)
        gated = _lines.sub_lines(
            redact._AUTHORIZATION, redact._authorization, words, text, text.lower()
        )
        assert gated == whole


@settings(max_examples=200)
@given(st.lists(st.one_of(_SECRET_TEXTS.map("".join), _ASSIGNED), max_size=6))
def test_lines_redacted_together_come_out_as_each_redacted_alone(texts: list[str]) -> None:
    """Lines redacted in one batch, ASCII and not mixed, come out as each line redacted alone;
    and messages redacted together come out as each redacted alone."""
    lines = [line for text in texts for line in text.split("\n") if "-----BEGIN" not in line]
    assert redact._redact_lines(lines) == [redact._redact_whole(line) for line in lines]
    messages = [Message("tool", text, tool_call_id="c") for text in texts]
    together = redact.redacted_all(messages)
    assert [m.content for m in together] == [redact.redact_secrets(text) for text in texts]


_TEST_OUTPUTS = st.lists(
    st.sampled_from(
        ["=", "==== ", "3 passed", ", 1 failed", " in 0.12s", " in ", " (0:00:01)", " ====",
         "Ran 3 tests in 0.01s", "Ran ", "OK", "FAILED (failures=1)", "test result: ok. 3 passed",
         "Tests:  1 failed, 2 passed", "Tests:", "  4 passing", " failing", "2 failing",
         "congratulations :)", "ERROR:  py39: commands failed", "ok  \tpkg/a\t0.1s", "ok\t",
         "FAIL pkg/b", "FAIL", "no tests ran", "x", " ", "\t", "\n", "\n", "é"]
    ),
    max_size=30,
).map("".join)  # fmt: skip


@settings(max_examples=400)
@given(_TEST_OUTPUTS)
def test_test_summaries_are_found_in_the_lines_that_hold_their_literals(output: str) -> None:
    """Each test-summary pattern, passed over only the lines that hold one of its literals,
    finds exactly what a pass over the whole output finds, so the outcome read is the same."""
    for pattern, needs in testruns.NEEDS.items():
        expected = [(m.span(), m.group(0)) for m in pattern.finditer(output)]
        found = [(m.span(), m.group(0)) for m in _lines.matches(pattern, needs, output)]
        assert found == expected, pattern.pattern
    assert build.is_request(output) == (
        bool(output.strip())
        and not output.strip().startswith("[ctxfold:")
        and not build._DEMONSTRATION.search(output.strip()[:4000])
    )
