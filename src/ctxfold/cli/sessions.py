"""``ctxfold sessions``: list, show, log, export, import, recall and watch stored sessions."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from ctxfold.cli._common import (
    DATABASE_ENV,
    OutputFile,
    check_writable,
    database_file,
    database_option,
    echo_json,
    in_memory,
    input_argument,
    is_stdout,
    json_option,
    named_store,
    open_database,
    printable,
    read_input,
    repair_option,
)
from ctxfold.cli._errors import terminated
from ctxfold.errors import ConflictError, InvalidInputError
from ctxfold.events import (
    MESSAGE,
    Compaction,
    Event,
    Mask,
    Overflow,
    Pin,
    Reset,
    Retraction,
    Unpin,
    Usage,
)
from ctxfold.session.recall import DEFAULT_MAX_TOKENS

if TYPE_CHECKING:
    from ctxfold.messages import Message
    from ctxfold.messages.jsonl import Format
    from ctxfold.session import Session
    from ctxfold.storage import StoreBase

# Where the group's own -d/--json land, for its subcommands to inherit.
_DATABASE = "ctxfold.sessions.database"
_JSON = "ctxfold.sessions.json"
_FILE_POLL = 0.2
"""Seconds between looks for a SQLite file a watch waits for."""


@click.group(invoke_without_command=True)
@database_option()
@json_option
@click.pass_context
def sessions(ctx: click.Context, database: str | None, as_json: bool) -> None:
    """Look at the sessions stored in a database, or import one. Without a subcommand: list.

    The database is -d/--database URL (here or after the subcommand), else
    $CTXFOLD_DATABASE_URL, else the embedded SQLite file.

    \b
    Examples:
      ctxfold sessions
      ctxfold sessions import run.jsonl --session run-42
      ctxfold sessions show run-42 -d sqlite:///agent.db
      ctxfold sessions export run-42 -o run-42.jsonl
    """
    ctx.meta[_DATABASE] = database
    ctx.meta[_JSON] = as_json
    if ctx.invoked_subcommand is None:
        _list(database, as_json)


@sessions.command("list")
@database_option()
@json_option
def list_sessions(database: str | None, as_json: bool) -> None:
    """List the sessions, one per line: the id and how many events its log holds.

    \b
    Example:
      ctxfold sessions list -d postgresql://agent@db.internal/agents
    """
    _list(_database(database), _json(as_json))


@sessions.command()
@click.argument("session_id", metavar="ID")
@database_option()
@json_option
def show(session_id: str, database: str | None, as_json: bool) -> None:
    """Show what the model is sent now for session ID: its projected messages, one per line.

    \b
    Example:
      ctxfold sessions show chat-1
    """
    with open_database(_database(database), create=False) as store:
        messages = _existing(store, session_id).messages()
    if _json(as_json):
        echo_json({"session": session_id, "messages": [m.to_dict() for m in messages]})
        return
    for index, message in enumerate(messages, 1):
        click.echo(f"{index:>4}  {_one_line(message)}")


@sessions.command()
@click.argument("session_id", metavar="ID")
@database_option()
@json_option
def log(session_id: str, database: str | None, as_json: bool) -> None:
    """Show the full event log of session ID: every message, compaction, mask, usage report,
    pin, retraction and reset.

    \b
    Example:
      ctxfold sessions log chat-1
    """
    with open_database(_database(database), create=False) as store:
        events = _existing(store, session_id).events()
    if _json(as_json):
        echo_json({"session": session_id, "events": [_event_dict(e) for e in events]})
        return
    for event in events:
        click.echo(f"{event.seq:>5}  {event.type:<10}  {_describe(event)}")


@sessions.command()
@click.argument("session_id", metavar="ID")
@click.option(
    "-o",
    "--output",
    type=OutputFile(),
    help="Write here instead of stdout ('-' is stdout too).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["openai", "anthropic"]),
    default="openai",
    show_default=True,
)
@database_option()
def export(session_id: str, output: Path | None, fmt: str, database: str | None) -> None:
    """Export the projected history of session ID as JSONL, ready to send to a provider: to
    stdout, or to the file -o names.

    \b
    Example:
      ctxfold sessions export chat-1 --format anthropic -o chat-1.jsonl
    """
    from ctxfold.messages import dumps_jsonl, write_jsonl

    if output is not None:
        check_writable(output)
    with open_database(_database(database), create=False) as store:
        messages = _existing(store, session_id).messages()
    if output is None or is_stdout(output):
        click.echo(dumps_jsonl(messages, cast("Format", fmt)), nl=False)
        return
    write_jsonl(output, messages, format=cast("Format", fmt))
    click.echo(f"wrote {len(messages)} messages of {session_id!r} to {output}", err=True)


@sessions.command("import")
@input_argument
@click.option("--session", "session_id", required=True, metavar="ID", help="The new session's id.")
@database_option()
@repair_option
@json_option
def import_transcript(
    input: Path, session_id: str, database: str | None, repair: bool, as_json: bool
) -> None:
    """Import the transcript INPUT (JSONL, either format) as a new session.

    The input must be a valid history (or be made one with --repair), and the session id must be
    new: an import never mixes two runs.

    \b
    Example:
      ctxfold sessions import run.jsonl --session run-42 -d sqlite:///agent.db
    """
    transcript = read_input(input, repair=repair)
    events: list[Event] | None = None
    appending = False
    try:
        with open_database(_database(database)) as store:
            try:
                appending = True
                # expected_seq=0: the store itself refuses, atomically, a session that has events.
                events = store.session(session_id).append(transcript.messages, expected_seq=0)
            except ConflictError as exc:
                raise InvalidInputError(
                    f"session {session_id!r} already has {exc.actual_seq} events; "
                    "import into a new --session id"
                ) from None
    except KeyboardInterrupt as exc:
        # The line printed for the interrupt says what it left, so that a retry is not a guess.
        count = len(transcript.messages)
        exc.args = (_interrupted_import(session_id, count, appending, events),)
        raise
    if _json(as_json):
        echo_json(
            {
                "input": str(input),
                "session": session_id,
                "messages": len(transcript.messages),
                "first_seq": events[0].seq,
                "last_seq": events[-1].seq,
                "repaired": len(transcript.fixes),
            }
        )
        return
    click.echo(
        f"imported {len(transcript.messages)} messages from {input} into session "
        f"{session_id!r} (seq {events[0].seq}-{events[-1].seq})"
    )


def _interrupted_import(
    session_id: str, count: int, appending: bool, events: list[Event] | None
) -> str:
    """What an import interrupted at some point left in the store: nothing before the append
    began, everything once it returned, and in between, the store's all or nothing, which
    only the store can now tell."""
    if not appending:
        return "interrupted before anything was stored; the import can be run again"
    if events is not None:
        # The append returned: the store committed it, whatever the interrupt cut short after.
        return (
            f"interrupted after the import was stored: session {session_id!r} holds the "
            f"{count} messages (seq {events[0].seq}-{events[-1].seq})"
        )
    return (
        f"interrupted; an import is all or nothing, so session {session_id!r} holds either all "
        f"{count} messages or none: run ctxfold sessions show {shlex.quote(session_id)} to "
        "tell which"
    )


def _list(database: str | None, as_json: bool) -> None:
    with open_database(database, create=False) as store:
        found = [(session_id, store.last_seq(session_id)) for session_id in store.sessions()]
    if as_json:
        echo_json({"sessions": [{"id": i, "events": n} for i, n in found]})
        return
    for session_id, count in found:
        click.echo(f"{printable(session_id)}\t{count} events")


@sessions.command("recall")
@click.argument("session_id", metavar="SESSION")
@click.argument("query", nargs=-1)
@click.option(
    "--ref",
    metavar="REF",
    help="What a note, placeholder or summary prints: 41-57, 'log items 41–57', 'event 12', "
    "a call id, or c12 for the compaction event at seq 12.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_TOKENS,
    show_default=True,
    help="The most tokens to print, frame included.",
)
@database_option()
@json_option
def recall(
    session_id: str,
    query: tuple[str, ...],
    ref: str | None,
    max_tokens: int,
    database: str | None,
    as_json: bool,
) -> None:
    """Print original messages of SESSION that its view no longer shows: those matching QUERY
    (full-text search, best first), or those --ref names. The text is what the model gets from
    the recall tool: quoted data, at most --max-tokens tokens.

    \b
    Examples:
      ctxfold sessions recall chat-1 "TypeError: unsupported operand"
      ctxfold sessions recall chat-1 --ref 41-57
      ctxfold sessions recall chat-1 src/app/models.py --max-tokens 500 --json
    """
    text = " ".join(query) if query else None
    with open_database(_database(database), create=False) as store:
        found = _existing(store, session_id).recall(text, ref=ref, max_tokens=max_tokens)
    if not _json(as_json):
        click.echo(found.text)
        return
    echo_json(
        {
            "session": session_id,
            "query": found.query,
            "ref": found.ref,
            "tokens": found.tokens,
            "seqs": list(found.seqs),
            "cut": list(found.cut),
            "left_out": list(found.left_out),
            "messages": [
                {"seq": seq, "message": message.to_dict()}
                for seq, message in zip(found.seqs, found.messages, strict=True)
            ],
            "text": found.text,
        }
    )


def _seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """--idle-timeout: a number of seconds, 0 or more (inf: for ever), never NaN."""
    if value is not None and value != value:
        raise click.BadParameter("nan is not a number of seconds; give 0 or more", ctx, param)
    return value


@sessions.command("watch")
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--after",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="SEQ",
    help="Start after this seq: 0 shows the whole log first; the last seq shows only new events.",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0),
    callback=_seconds,
    default=None,
    metavar="S",
    help="Stop after S seconds with no new event (default: follow until interrupted).",
)
@database_option()
@json_option
def watch(
    session_id: str, after: int, idle_timeout: float | None, database: str | None, as_json: bool
) -> None:
    """Follow SESSION live: print each event as it lands, one line each as 'ctxfold sessions
    log' does, until interrupted (Ctrl-C) or, with --idle-timeout, until it goes quiet.

    A session with no events yet is waited for, and so is a SQLite file that is not there yet
    (the first writer makes it; the watch makes none). With --json, each event is one JSON
    object on its own line (JSON Lines), with the keys of 'ctxfold sessions log --json'.

    \b
    Examples:
      ctxfold sessions watch chat-1
      ctxfold sessions watch chat-1 --after 120 -d postgresql://agent@db.internal/agents
    """
    url = _database(database)
    if in_memory(url):
        named = url or f"{named_store(url)} (from ${DATABASE_ENV})"
        raise InvalidInputError(
            f"cannot watch {named}: a store in memory lives and dies with one process, so no "
            "other process can add events to it and the watch would wait for ever; name the "
            "database the agent writes to, such as sqlite:///agent.db"
        )
    try:
        file = database_file(url)
        if file is not None and not _appeared(file, idle_timeout):
            return
        with open_database(url, create=False) as store:
            if not store.last_seq(session_id):
                click.echo(f"waiting for session {session_id!r}: it has no events yet", err=True)
            as_lines = _json(as_json)
            for event in store.session(session_id).watch(after, idle_timeout=idle_timeout):
                if as_lines:
                    click.echo(json.dumps(_event_dict(event), ensure_ascii=False))
                else:
                    click.echo(f"{event.seq:>5}  {event.type:<10}  {_describe(event)}")
    except KeyboardInterrupt:
        if terminated():
            raise  # SIGTERM: a service manager stopping it, told apart by the exit status
        # Ctrl-C is how a watch ends: a clean exit, no traceback


def _appeared(file: Path, idle_timeout: float | None) -> bool:
    """Wait until `file` exists (True), or until `idle_timeout` seconds pass (False).

    A watch started before the agent's first write finds no database yet. Making an empty one
    would also leave a file behind at every mistyped path, and wait on it for ever; so the watch
    waits for the writer to make it, and says where it looks, so that a typo shows.
    """
    if file.exists():
        return True
    click.echo(
        f"waiting for {file.absolute()}: no database there yet; the first writer makes it "
        "(check the path if one should be there)",
        err=True,
    )
    deadline = None if idle_timeout is None else time.monotonic() + idle_timeout
    while not file.exists():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(_FILE_POLL)
    return True


def _database(given: str | None) -> str | None:
    """-d after the subcommand, else -d given to the group."""
    return given if given is not None else click.get_current_context().meta.get(_DATABASE)


def _json(given: bool) -> bool:
    return given or bool(click.get_current_context().meta.get(_JSON))


def _existing(store: StoreBase, session_id: str) -> Session:
    if not store.last_seq(session_id):
        raise InvalidInputError(
            f"no session {session_id!r} in this database; 'ctxfold sessions list' shows the ids"
        )
    return store.session(session_id)


def _event_dict(event: Event) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "type": event.type,
        "data": dict(event.data),
        "created_at": event.created_at,
    }


def _one_line(message: Message, width: int = 100) -> str:
    text = " ".join(message.text.split())
    calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
    body = " ".join(part for part in (text, f"-> {calls}" if calls else "") if part)
    if message.tool_call_id:
        body = f"[{message.tool_call_id}] {body}"
    body = body if len(body) <= width else body[: width - 3] + "..."
    return f"{message.role:<9}  {body}"


def _describe(event: Event) -> str:
    if event.type == MESSAGE:
        return _one_line(event.message, 80)
    payload = event.payload
    if isinstance(payload, Compaction):
        tokens = (
            f", {payload.tokens_before} -> {payload.tokens_after} tokens"
            if payload.tokens_before is not None and payload.tokens_after is not None
            else ""
        )
        return (
            f"{payload.strategy or '?'}: items {payload.first}..{payload.last} -> one "
            f"{payload.kind}{tokens}"
        )
    if isinstance(payload, Mask):
        return f"{payload.strategy or '?'}: {len(payload.items)} tool results cleared"
    if isinstance(payload, Usage):
        return f"{payload.prompt_tokens} prompt tokens after seq {payload.after_seq}"
    if isinstance(payload, Retraction):
        return f"item {payload.id} taken back out of the projection"
    if isinstance(payload, Reset):
        return "the projection was emptied; later messages start afresh"
    if isinstance(payload, (Pin, Unpin)):
        return f"items {', '.join(map(str, payload.ids))}"
    if isinstance(payload, Overflow):
        return f"the request after seq {payload.after_seq} overflowed the context window"
    return " ".join(json.dumps(dict(event.data), ensure_ascii=False).split())[:100]
