"""Shared fixtures: the real transcripts beside the repository, and PostgreSQL when configured."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxfold.storage import StoreBase, open_store
from tests._stores import ALL_KINDS, drop_schema, empty_store_url, fresh_schema_name

ROOT = Path(__file__).resolve().parents[1]
TRANSCRIPTS = ROOT.parent / "shared" / "data" / "transcripts"

# Fixture data and the scripts that made it, with the version of ctxfold that made it: not tests.
collect_ignore = ["fixtures"]


def transcript_paths() -> list[Path]:
    """Every shared transcript, or [] when the folder is absent (tests then skip)."""
    return sorted(TRANSCRIPTS.glob("*.jsonl")) if TRANSCRIPTS.is_dir() else []


def transcript_params() -> list[object]:
    """pytest params, one per transcript, with a skipping placeholder when there are none."""
    paths = transcript_paths()
    if not paths:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{TRANSCRIPTS} is absent"))]
    return [pytest.param(p, id=p.stem) for p in paths]


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """CTXFOLD_POSTGRES_URL, reachable; skips without it, fails without it when CI=true."""
    url = os.environ.get("CTXFOLD_POSTGRES_URL")
    in_ci = os.environ.get("CI", "").lower() == "true"
    if not url:
        if in_ci:
            pytest.fail("CI=true but CTXFOLD_POSTGRES_URL is not set")
        pytest.skip("CTXFOLD_POSTGRES_URL is not set; PostgreSQL tests skipped")
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("select 1")
    except Exception as exc:  # any failure to reach the server means the same thing here
        if in_ci:
            pytest.fail(f"CI=true but PostgreSQL at CTXFOLD_POSTGRES_URL is unreachable: {exc}")
        pytest.skip(f"PostgreSQL at CTXFOLD_POSTGRES_URL is unreachable: {exc}")
    return url


@pytest.fixture
def pg_schema(postgres_url: str) -> Iterator[str]:
    """A PostgreSQL schema name no other test uses; the schema is dropped at teardown."""
    name = fresh_schema_name()
    yield name
    drop_schema(postgres_url, name)


@pytest.fixture(params=ALL_KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty store of each kind: memory, a SQLite file, a fresh PostgreSQL schema
    (a test module that needs other kinds defines its own)."""
    yield from empty_store_url(request.param, request, tmp_path)


@pytest.fixture
def store(store_url: str) -> Iterator[StoreBase]:
    """An empty store of each kind, open for the test."""
    with open_store(store_url) as opened:
        yield opened
