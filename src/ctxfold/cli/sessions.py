"""``ctxfold sessions list|show|log|export`` and ``ctxfold import``: sessions in a database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxfold.cli._common import database_option, open_database, read_transcript
from ctxfold.errors import InvalidInputError
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
    from ctxfold.session import Session
    from ctxfold.storage import StoreBase


@click.group()
def sessions() -> None:
    """Look at the sessions stored in a database.

    The database is -d/--database URL, else $CTXFOLD_DATABASE_URL, else the embedded SQLite file.

    \b
    Examples:
      ctxfold sessions list
      ctxfold sessions show chat-1 -d sqlite:///agent.db
      ctxfold sessions export chat-1 -o chat-1.jsonl
    """


@sessions.command("list")
@database_option
def list_sessions(database: str | None) -> None:
    """List the sessions, one per line: the id and how many events its log holds.

    \b
    Example:
      ctxfold sessions list -d postgresql://agent@db.internal/agents
    """
    with open_database(database) as store:
        for session_id in store.sessions():
            click.echo(f"{session_id}\t{store.last_seq(session_id)} events")


@sessions.command()
@click.argument("session_id", metavar="ID")
@database_option
def show(session_id: str, database: str | None) -> None:
    """Show what the model is sent now for session ID: its projected messages, one per line.

    \b
    Example:
      ctxfold sessions show chat-1
    """
    with open_database(database) as store:
        for index, message in enumerate(_existing(store, session_id).messages(), 1):
            click.echo(f"{index:>4}  {_one_line(message)}")


@sessions.command()
@click.argument("session_id", metavar="ID")
@database_option
def log(session_id: str, database: str | None) -> None:
    """Show the full event log of session ID: every message, compaction, mask and usage report.

    \b
    Example:
      ctxfold sessions log chat-1
    """
    with open_database(database) as store:
        for event in _existing(store, session_id).events():
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
@database_option
def export(session_id: str, output: Path | None, fmt: str, database: str | None) -> None:
    """Export the projected history of session ID as JSONL, ready to send to a provider.

    \b
    Example:
      ctxfold sessions export chat-1 --format anthropic -o chat-1.jsonl
    """
    from ctxfold.messages import to_anthropic, to_openai, write_jsonl

    with open_database(database) as store:
        messages = _existing(store, session_id).messages()
    if output is not None:
        write_jsonl(output, messages, format=fmt)  # type: ignore[arg-type]
        click.echo(f"wrote {len(messages)} messages of {session_id!r} to {output}", err=True)
        return
    rows: list[Any]
    if fmt == "anthropic":
        system, rows = to_anthropic(messages)
        rows = ([{"system": system}] if system is not None else []) + rows
    else:
        rows = list(to_openai(messages))
    for row in rows:
        click.echo(json.dumps(row, ensure_ascii=False))


@click.command("import")
@click.argument("input", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--session", "session_id", required=True, metavar="ID", help="The new session's id.")
@database_option
def import_transcript(input: Path, session_id: str, database: str | None) -> None:
    """Import the transcript INPUT (JSONL, either format) as a new session.

    \b
    Example:
      ctxfold import run.jsonl --session run-42 -d sqlite:///agent.db
    """
    transcript = read_transcript(input)
    with open_database(database) as store:
        existing = store.last_seq(session_id)
        if existing:
            raise InvalidInputError(
                f"session {session_id!r} already has {existing} events; "
                "import into a new --session id"
            )
        events = store.session(session_id).append(transcript.messages)
    click.echo(
        f"imported {len(transcript.messages)} messages from {input} into session "
        f"{session_id!r} (seq 1-{len(events)})"
    )


def _existing(store: StoreBase, session_id: str) -> Session:
    if not store.last_seq(session_id):
        raise InvalidInputError(
            f"no session {session_id!r} in this database; 'ctxfold sessions list' shows the ids"
        )
    return store.session(session_id)


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
