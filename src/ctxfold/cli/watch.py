"""``ctxfold sessions watch``: follow a session live, one line per event as it lands."""

from __future__ import annotations

import click

from ctxfold.cli._common import database_option, open_database
from ctxfold.cli.sessions import _describe


@click.command("watch")
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
    default=None,
    metavar="S",
    help="Stop after S seconds with no new event (default: follow until interrupted).",
)
@database_option
def watch(session_id: str, after: int, idle_timeout: float | None, database: str | None) -> None:
    """Follow SESSION live: print each event as it lands, one line each as 'ctxfold sessions
    log' does, until interrupted (Ctrl-C) or, with --idle-timeout, until it goes quiet.

    A session with no events yet is waited for.

    \b
    Examples:
      ctxfold sessions watch chat-1
      ctxfold sessions watch chat-1 --after 120 -d postgresql://agent@db.internal/agents
    """
    with open_database(database) as store:
        if not store.last_seq(session_id):
            click.echo(f"waiting for session {session_id!r}: it has no events yet", err=True)
        try:
            for event in store.session(session_id).watch(after, idle_timeout=idle_timeout):
                click.echo(f"{event.seq:>5}  {event.type:<10}  {_describe(event)}")
        except KeyboardInterrupt:
            pass  # Ctrl-C is how a watch ends: a clean exit, no traceback
