"""``ctxfold demo``: ctxfold at work on a generated agent session, offline and without a key."""

from __future__ import annotations

from pathlib import Path

import click

DEMO_WINDOW = 16_000
"""Small enough that the demo session (about 34,000 tokens) needs several compactions."""
DEMO_STEPS = 60


def _folder(ctx: click.Context, param: click.Parameter, value: str) -> Path:
    """--out: a folder name; an empty one, which would mean the current folder, is refused."""
    if not value.strip():
        raise click.BadParameter(
            f"{value!r} names no folder; give one, such as ctxfold-demo ('.' for this one)",
            ctx,
            param,
        )
    return Path(value)


@click.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    callback=_folder,
    default="ctxfold-demo",
    show_default=True,
    help="Folder for the session, its log and the HTML page.",
)
def demo(out: Path) -> None:
    """Generate a realistic coding-agent session, replay it at a 16,000-token window, and write
    an HTML page of the run. Needs no network and no API key.

    Writes OUT/session.jsonl (the generated transcript, OpenAI format), OUT/demo.db (the
    session's event log in SQLite, the embedded default store) and OUT/replay.html.

    \b
    Example:
      ctxfold demo --out /tmp/ctxfold-demo
    """
    from ctxfold.cli.replay import print_replay, run_replay
    from ctxfold.messages import write_jsonl
    from ctxfold.replay import write_html
    from ctxfold.testing.transcripts import generate
    from ctxfold.tokens import Budget

    out.mkdir(parents=True, exist_ok=True)
    messages = generate(seed=0, steps=DEMO_STEPS)
    session_path = out / "session.jsonl"
    write_jsonl(session_path, messages, format="openai")
    click.echo(f"generated {session_path}: a coding-agent session of {len(messages)} messages")
    db_url = f"sqlite:///{out / 'demo.db'}"
    result = run_replay(messages, Budget(window=DEMO_WINDOW), database=db_url, name="demo")
    html_path = out / "replay.html"
    write_html(html_path, result, title="ctxfold demo: a coding-agent session")
    print_replay(result, str(session_path))
    click.echo(f"log: {out / 'demo.db'} (try: ctxfold sessions -d {db_url})")
    click.echo(f"html: {html_path} (open it in a browser)")
    click.echo(f"next: ctxfold compact {session_path} --window 8000 -o {out / 'compacted.jsonl'}")
