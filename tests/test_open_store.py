"""open_store turns a URL into the store it names, and says clearly when it names none."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxfold.errors import InvalidInputError, StoreUnavailableError
from ctxfold.events import NewEvent
from ctxfold.storage import MemoryStore, PostgresStore, SQLiteStore, open_store


def test_memory_url_opens_a_memory_store() -> None:
    """``memory://`` opens an empty MemoryStore."""
    with open_store("memory://") as store:
        assert isinstance(store, MemoryStore)
        assert store.sessions() == []


def test_sqlite_url_with_three_slashes_is_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sqlite:///data/x.db`` is a file relative to the working directory."""
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///data/x.db") as store:
        assert isinstance(store, SQLiteStore)
        store.append("s", [NewEvent("turn")])
    assert (tmp_path / "data" / "x.db").is_file()


def test_sqlite_url_with_four_slashes_is_absolute(tmp_path: Path) -> None:
    """``sqlite:////abs/x.db`` is an absolute path, and reopening it finds the same events."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert url.startswith("sqlite:////")
    with open_store(url) as store:
        store.append("s", [NewEvent("turn", {"n": 1})])
    with open_store(url) as store:
        assert [e.data for e in store.read("s")] == [{"n": 1}]


def test_sqlite_memory_url_is_private_and_in_memory(tmp_path: Path) -> None:
    """``sqlite:///:memory:`` opens a SQLite store that writes no file."""
    with open_store("sqlite:///:memory:") as one, open_store("sqlite:///:memory:") as two:
        one.append("s", [NewEvent("turn")])
        assert two.sessions() == []
        assert isinstance(one, SQLiteStore)


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgres_url_opens_a_store_in_the_named_schema(
    postgres_url: str, pg_schema: str, scheme: str
) -> None:
    """``postgresql://…?schema=x`` (or ``postgres://``) opens a PostgresStore in schema x."""
    url = postgres_url.replace("postgresql://", f"{scheme}://", 1)
    with open_store(f"{url}?connect_timeout=5&schema={pg_schema}") as store:
        assert isinstance(store, PostgresStore)
        assert store.schema == pg_schema
        store.append("s", [NewEvent("turn")])
    with PostgresStore(postgres_url, schema=pg_schema) as store:
        assert store.last_seq("s") == 1


@pytest.mark.parametrize(
    "url", ["redis://localhost", "memory", "memory://somewhere", "file:///tmp/x.db", ""]
)
def test_an_unsupported_url_names_itself_and_the_supported_schemes(url: str) -> None:
    """An unknown URL raises InvalidInputError quoting it and listing the supported schemes."""
    with pytest.raises(InvalidInputError) as caught:
        open_store(url)
    message = str(caught.value)
    assert repr(url) in message
    for scheme in ("memory://", "sqlite:///", "postgresql://"):
        assert scheme in message


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///", "sqlite://host/x.db", "sqlite:///x?a=1"]
)
def test_a_malformed_sqlite_url_explains_the_form(url: str) -> None:
    """A SQLite URL without a path, or with a host or query, says what the form is."""
    with pytest.raises(InvalidInputError, match=r"sqlite:///relative/path\.db"):
        open_store(url)


def test_an_error_never_shows_a_password() -> None:
    """The password of a URL is masked in the error message."""
    with pytest.raises(InvalidInputError) as caught:
        open_store("mysql://admin:hunter2@db.internal/app")
    assert "hunter2" not in str(caught.value)
    assert "admin:***@db.internal" in str(caught.value)


def test_a_schema_parameter_needs_one_name() -> None:
    """``?schema=`` empty or given twice is refused before any connection is tried."""
    for url in (
        "postgresql://u:pw@nowhere/db?schema=",
        "postgresql://nowhere/db?schema=a&schema=b",
    ):
        with pytest.raises(InvalidInputError, match="schema") as caught:
            open_store(url)
        assert "pw@" not in str(caught.value)


def test_create_false_opens_only_a_sqlite_file_that_exists(tmp_path: Path) -> None:
    """``create=False`` (for readers) refuses a missing SQLite file with StoreUnavailableError
    naming it, and makes neither the file nor its folder; a file that exists opens as usual, and
    the stores with no file to make ignore the flag."""
    missing = tmp_path / "folder" / "typo.db"
    with pytest.raises(StoreUnavailableError, match=r"no SQLite database at .*typo\.db"):
        open_store(f"sqlite:///{missing}", create=False)
    assert not missing.parent.exists()
    with SQLiteStore(tmp_path / "there.db") as store:
        store.append("s", [NewEvent("turn")])
    with open_store(f"sqlite:///{tmp_path / 'there.db'}", create=False) as store:
        assert store.last_seq("s") == 1
    with open_store("sqlite:///:memory:", create=False) as store:
        assert store.sessions() == []
    assert isinstance(open_store("memory://", create=False), MemoryStore)


def test_a_missing_relative_sqlite_path_is_named_with_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative path is read from the working folder, which the error spells out."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreUnavailableError) as caught:
        SQLiteStore("runs/agent.db", create=False)
    assert f"'runs/agent.db' ({tmp_path / 'runs' / 'agent.db'})" in str(caught.value)
    assert not (tmp_path / "runs").exists()


def test_the_schema_parameter_is_taken_out_and_the_rest_kept_as_libpq_reads_it() -> None:
    """``schema`` is ctxfold's; every other parameter goes to the server with its spaces and plus
    signs percent-encoded, the only spelling libpq reads back as they were."""
    from ctxfold.storage.postgres import split_schema

    url = (
        "postgresql://u@db:5432/app?options=-c%20search_path%3Da%2Bb&schema=agents&sslmode=require"
    )
    assert split_schema(url) == (
        "postgresql://u@db:5432/app?options=-c%20search_path%3Da%2Bb&sslmode=require",
        "agents",
    )
    assert split_schema("postgresql://db/app") == ("postgresql://db/app", None)
    with pytest.raises(InvalidInputError, match="schema query parameter once"):
        split_schema("postgresql://db/app?schema=a&schema=b")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql:///app?schema=agents", ("postgresql:///app", "agents")),
        ("postgresql:///app?host=/run/pg&schema=a", ("postgresql:///app?host=/run/pg", "a")),
        ("postgresql://[::1]:5432/app?schema=a#x", ("postgresql://[::1]:5432/app#x", "a")),
        ("postgresql:///app", ("postgresql:///app", None)),
    ],
)
def test_the_schema_is_cut_out_and_nothing_else_of_the_url_changes(
    url: str, expected: tuple[str, str | None]
) -> None:
    """A URL with no host (libpq's local socket form), a host in the query or an IPv6 host keeps
    every character but the schema parameter: it is cut out, not parsed and rebuilt (which made
    postgresql:///app into postgresql:/app)."""
    from ctxfold.storage.postgres import split_schema

    assert split_schema(url) == expected


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://u:hunter2@[::1/db", r"is not a PostgreSQL URL: .*IPv6"),
        ("postgresql://u@127.0.0.1:1/db?connect_timeout=1e999", "connect_timeout must be"),
    ],
)
def test_a_postgres_url_libpq_cannot_read_is_an_input_error_without_its_password(
    url: str, says: str
) -> None:
    """A bracket left open or an infinite timeout is refused as bad input (it was an internal
    ValueError or OverflowError), and the password is masked in all of the message."""
    pytest.importorskip("psycopg")
    with pytest.raises(InvalidInputError, match=says) as caught:
        open_store(url)
    assert "hunter2" not in str(caught.value)
