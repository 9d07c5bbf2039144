"""``ctxfold sessions [list|show|log|export|import]``: the sessions stored in a database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from ctxfold.cli._common import (
    database_option,
    echo_json,
    input_argument,
    json_option,
    open_database,
    read_input,
    repair_option,
)
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

if TYPE_CHECKING:
    from ctxfold.messages import Message
    from ctxfold.messages.jsonl import Format
    from ctxfold.session import Session
    from ctxfold.storage import StoreBase

# Where the group's own -d/--json land, for its subcommands to inherit.
_DATABASE = "ctxfold.sessions.database"
_JSON = "ctxfold.sessions.json"


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
    with open_database(_database(database)) as store:
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
    with open_database(_database(database)) as store:
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
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write here instead of stdout.",
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
    """Export the projected history of session ID as JSONL, ready to send to a provider.

    \b
    Example:
      ctxfold sessions export chat-1 --format anthropic -o chat-1.jsonl
    """
    from ctxfold.messages import dumps_jsonl, write_jsonl

    with open_database(_database(database)) as store:
        messages = _existing(store, session_id).messages()
    if output is None:
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
    with open_database(_database(database)) as store:
        try:
            # expected_seq=0: the store itself refuses, atomically, a session that has events.
            events = store.session(session_id).append(transcript.messages, expected_seq=0)
        except ConflictError as exc:
            raise InvalidInputError(
                f"session {session_id!r} already has {exc.actual_seq} events; "
                "import into a new --session id"
            ) from None
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


def _list(database: str | None, as_json: bool) -> None:
    with open_database(database) as store:
        found = [(session_id, store.last_seq(session_id)) for session_id in store.sessions()]
    if as_json:
        echo_json({"sessions": [{"id": i, "events": n} for i, n in found]})
        return
    for session_id, count in found:
        click.echo(f"{session_id}\t{count} events")


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
