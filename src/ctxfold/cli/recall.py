"""``ctxfold sessions recall``: the original messages a session's view no longer shows."""

from __future__ import annotations

import click

from ctxfold.cli._common import database_option, echo_json, open_database
from ctxfold.errors import InvalidInputError
from ctxfold.session.recall import DEFAULT_MAX_TOKENS


@click.command("recall")
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
    type=int,
    default=DEFAULT_MAX_TOKENS,
    show_default=True,
    help="The most tokens to print, frame included.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the text.")
@database_option
def recall(
    session_id: str,
    query: tuple[str, ...],
    ref: str | None,
    max_tokens: int,
    as_json: bool,
    database: str | None,
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
    with open_database(database) as store:
        if not store.last_seq(session_id):
            raise InvalidInputError(
                f"no session {session_id!r} in this database; 'ctxfold sessions list' shows the ids"
            )
        found = store.session(session_id).recall(text, ref=ref, max_tokens=max_tokens)
    if not as_json:
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
