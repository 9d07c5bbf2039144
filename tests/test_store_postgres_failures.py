"""PostgresStore under hard failures: every one is a clear ctxfold error, never a raw driver error.

Nothing shared is stopped: an outage is a URL to a closed port or a database that does not exist,
and a shutdown is ``pg_terminate_backend`` of this test's own connections, found by a unique
``application_name``.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from ctxfold.errors import InvalidInputError, StoreUnavailableError
from ctxfold.events import NewEvent
from ctxfold.storage import PostgresStore, open_store

pytestmark = pytest.mark.postgres

PASSWORD = "s3cret-Pa55word"


@pytest.fixture
def schema(pg_schema: str) -> str:
    """A schema name no other test uses; dropped at teardown."""
    return pg_schema


def _with_param(url: str, key: str, value: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{key}={value}"


def _with_password(url: str) -> str:
    """`url` with a password added (trust auth ignores it; the point is it never shows)."""
    scheme, rest = url.split("://", 1)
    userinfo, at, hostpart = rest.partition("@")
    if not at:
        return f"{scheme}://postgres:{PASSWORD}@{rest}"
    return f"{scheme}://{userinfo.split(':')[0]}:{PASSWORD}@{hostpart}"


def _host_url(url: str, host_port: str, database: str) -> str:
    """`url` pointed at another host:port and database, with a password in it."""
    scheme, rest = _with_password(url).split("://", 1)
    userinfo = rest.split("@", 1)[0]
    return f"{scheme}://{userinfo}@{host_port}/{database}"


# -- schema names ------------------------------------------------------------------------------


@pytest.mark.guarantee("schema-names-never-shared")
@pytest.mark.parametrize(
    "name", ["s" * 64, "é" * 32, "x" * 61 + "日", "pg_ctxfold", "pg_temp_ctxfold"]
)
def test_a_schema_name_postgres_would_cut_or_reserves_is_refused(
    postgres_url: str, name: str
) -> None:
    """Over 63 bytes (PostgreSQL would silently cut it, so two stores could share a table) or
    ``pg_``-prefixed: an InvalidInputError naming the name and the rule, before any connection."""
    with pytest.raises(InvalidInputError) as caught:
        PostgresStore(postgres_url, schema=name)
    message = str(caught.value)
    assert repr(name) in message
    assert ("63 bytes" in message) or ("'pg_'" in message)


@pytest.mark.guarantee("schema-names-never-shared")
def test_two_long_names_that_share_a_prefix_stay_apart(postgres_url: str) -> None:
    """Names of exactly 63 bytes that differ only in their last byte get their own tables."""
    import psycopg
    from psycopg import sql

    stem = f"t{uuid.uuid4().hex}".ljust(62, "x")
    names = [stem + "a", stem + "b"]
    assert all(len(n.encode()) == 63 for n in names)
    try:
        for n, name in enumerate(names):
            with PostgresStore(postgres_url, schema=name) as store:
                store.append("s", [NewEvent("turn", {"n": n})])
        for n, name in enumerate(names):
            with PostgresStore(postgres_url, schema=name) as store:
                assert [e.data for e in store.read("s")] == [{"n": n}]
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for name in names:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
                )


# -- the server cannot be reached --------------------------------------------------------------


@pytest.mark.guarantee("unreachable-store-one-error")
def test_a_closed_port_is_one_clear_error(postgres_url: str) -> None:
    """Nothing listening: StoreUnavailableError at once, naming the host and port without the
    password and saying what to check."""
    url = _host_url(postgres_url, "127.0.0.1:1", "test")
    for opener in (lambda: PostgresStore(url), lambda: open_store(url)):
        with pytest.raises(StoreUnavailableError) as caught:
            opener()
        message = str(caught.value)
        assert PASSWORD not in message
        assert "127.0.0.1:1" in message
        assert "check that the server is running" in message


@pytest.mark.guarantee("unreachable-store-one-error")
def test_a_missing_database_is_one_clear_error(postgres_url: str) -> None:
    """A database that does not exist: StoreUnavailableError quoting the server's reason."""
    missing = f"ctxfold_missing_{uuid.uuid4().hex[:12]}"
    url = _with_password(postgres_url).rsplit("/", 1)[0] + f"/{missing}"
    with pytest.raises(StoreUnavailableError) as caught:
        PostgresStore(url)
    message = str(caught.value)
    assert PASSWORD not in message
    assert missing in message
    assert "does not exist" in message


def test_timeouts_are_checked(postgres_url: str) -> None:
    """A connect or pool timeout that is not a positive number of seconds is refused."""
    for kwargs in ({"connect_timeout": 0}, {"pool_timeout": -1}, {"pool_timeout": "5"}):
        with pytest.raises(InvalidInputError, match="seconds"):
            PostgresStore(postgres_url, **kwargs)


# -- the server goes away while the store is in use --------------------------------------------


class _Blocker:
    """Holds a session's append lock from a connection of its own, so the store's next append to
    that session waits on the server, where the test can reach it."""

    def __init__(self, url: str, schema: str, session_id: str) -> None:
        import psycopg

        self._conn = psycopg.connect(url)
        self._conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", (schema, session_id)
        )

    def release(self) -> None:
        self._conn.rollback()
        self._conn.close()


def _wait_for_lock_wait(url: str, app: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(200):
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = %s AND wait_event_type = 'Lock'",
                (app,),
            ).fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.02)
    raise AssertionError(f"no connection of {app!r} ever waited on the lock")


def _in_thread(call: Any) -> tuple[threading.Thread, list[BaseException], list[Any]]:
    errors: list[BaseException] = []
    results: list[Any] = []

    def work() -> None:
        try:
            results.append(call())
        except BaseException as exc:  # reported by the caller's assertions
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    return thread, errors, results


@pytest.mark.guarantee("unreachable-store-one-error")
def test_a_server_shutdown_mid_append_is_one_clear_error_and_the_store_recovers(
    postgres_url: str, schema: str
) -> None:
    """``pg_terminate_backend`` (what a server shutdown does to a connection) during an append
    raises StoreUnavailableError, with the password hidden and the retry advice; the next append
    gets a fresh connection and works."""
    import psycopg

    app = f"ctxfold-test-{uuid.uuid4().hex[:12]}"
    url = _with_param(_with_password(postgres_url), "application_name", app)
    with PostgresStore(url, schema=schema, pool_size=2) as store:
        store.append("s", [NewEvent("turn", {"n": 0})])
        blocker = _Blocker(postgres_url, schema, "s")
        try:
            thread, errors, _ = _in_thread(
                lambda: store.append("s", [NewEvent("turn", {"n": 1})], idempotency_key="k1")
            )
            _wait_for_lock_wait(postgres_url, app)
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    (app,),
                )
            thread.join(30)
        finally:
            blocker.release()
        assert len(errors) == 1
        assert isinstance(errors[0], StoreUnavailableError)
        message = str(errors[0])
        assert PASSWORD not in message
        assert "idempotency_key" in message
        # The retry the message advises: the key makes it safe whatever happened before.
        retried = store.append("s", [NewEvent("turn", {"n": 1})], idempotency_key="k1")
        assert [e.seq for e in retried] == [2]
        assert [e.data["n"] for e in store.read("s")] == [0, 1]


@pytest.mark.guarantee("unreachable-store-one-error")
def test_a_pool_that_stays_busy_is_one_clear_error(postgres_url: str, schema: str) -> None:
    """With every pooled connection busy past `pool_timeout`, a call raises StoreUnavailableError
    that says so, instead of blocking for half a minute; once the pool frees up, calls work."""
    app = f"ctxfold-test-{uuid.uuid4().hex[:12]}"
    url = _with_param(postgres_url, "application_name", app)
    with PostgresStore(url, schema=schema, pool_size=1, pool_timeout=0.3) as store:
        store.append("s", [NewEvent("turn")])
        blocker = _Blocker(postgres_url, schema, "s")
        try:
            thread, errors, results = _in_thread(lambda: store.append("s", [NewEvent("turn")]))
            _wait_for_lock_wait(postgres_url, app)
            with pytest.raises(StoreUnavailableError, match="pool") as caught:
                store.last_seq("s")
            assert "pool_size" in str(caught.value)
        finally:
            blocker.release()
        thread.join(30)
        assert errors == []
        assert [e.seq for e in results[0]] == [2]
        assert store.last_seq("s") == 2


def test_driver_errors_that_mean_bad_input_or_no_server_are_mapped(
    postgres_url: str, schema: str
) -> None:
    """The error classes PostgreSQL uses for refused values (``ReservedName``,
    ``ProgramLimitExceeded``, data exceptions) become InvalidInputError, and those for a server
    that is going or gone (``AdminShutdown``, ``CrashShutdown``, connection failures, too many
    connections) become StoreUnavailableError; anything else (a ctxfold bug) stays as it is."""
    from psycopg import errors

    with PostgresStore(postgres_url, schema=schema) as store:
        for error in (
            errors.ReservedName,
            errors.ProgramLimitExceeded,
            errors.NumericValueOutOfRange,
        ):
            assert isinstance(store._map(error("refused"), "an append"), InvalidInputError)
        for error in (
            errors.AdminShutdown,
            errors.CrashShutdown,
            errors.CannotConnectNow,
            errors.ConnectionFailure,
            errors.TooManyConnections,
            errors.OperationalError,
        ):
            mapped = store._map(error("gone"), "an append")
            assert isinstance(mapped, StoreUnavailableError), error
        assert store._map(errors.UndefinedTable("bug"), "an append") is None


def test_the_longest_session_id_fits_postgres_indexes(postgres_url: str, schema: str) -> None:
    """A session id of the full 1,024 bytes in four-byte characters that do not compress is
    stored, keyed, searched and snapshotted (PostgreSQL's index entries stop near 2.7 KB)."""
    import random

    rng = random.Random(7)
    longest = "".join(chr(rng.randrange(0x1F300, 0x1FAFF)) for _ in range(256))
    assert len(longest.encode()) == 1024
    with PostgresStore(postgres_url, schema=schema) as store:
        message = {"message": {"role": "user", "content": "needle"}}
        store.append(longest, [NewEvent("message", message)], idempotency_key="k" * 256)
        store.save_snapshot(longest, 1, "{}")
        assert [h.seq for h in store.search(longest, "needle")] == [1]
        assert store.sessions() == [longest]


# -- a server that takes no writes ----------------------------------------------------------------


def _read_only(url: str) -> str:
    """`url` with every transaction read-only, as a hot standby or a read-only role has them."""
    return _with_param(url, "options", "-c%20default_transaction_read_only%3Don")


@pytest.mark.guarantee("unreachable-store-one-error")
def test_a_read_only_server_opens_to_read_and_refuses_writes_clearly(
    postgres_url: str, schema: str
) -> None:
    """Where every transaction is read-only (a standby), a schema already at the newest version
    opens without a write, and reads work; an append, or tables that would have to be created,
    is one StoreUnavailableError saying the server takes no writes, never a raw driver error.
    Nothing is written."""
    with PostgresStore(postgres_url, schema=schema) as store:
        store.append("s", [NewEvent("turn", {"n": 1})])
    with PostgresStore(_read_only(postgres_url), schema=schema) as store:
        assert [e.data for e in store.read("s")] == [{"n": 1}]
        with pytest.raises(StoreUnavailableError, match="takes no such write") as caught:
            store.append("s", [NewEvent("turn", {"n": 2})])
        assert "an append to session 's'" in str(caught.value)
    with PostgresStore(postgres_url, schema=schema) as store:
        assert store.last_seq("s") == 1
    fresh = f"{schema}_ro"
    try:
        with pytest.raises(StoreUnavailableError, match=r"creating the tables.*no such write"):
            PostgresStore(_read_only(postgres_url), schema=fresh)
    finally:
        import psycopg
        from psycopg import sql

        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(fresh)))


@pytest.mark.guarantee("unreachable-store-one-error")
def test_a_lock_timeout_from_the_url_options_cancels_with_one_clear_error(
    postgres_url: str, schema: str
) -> None:
    """libpq ``options`` in a store URL reach the server intact (a space as %20, which libpq
    reads, not as +, which it does not), and a statement the server cancels for its own
    lock_timeout is one StoreUnavailableError saying so; the append did not land."""
    import psycopg

    with PostgresStore(postgres_url, schema=schema) as store:
        store.append("s", [NewEvent("turn", {"n": 1})])
    url = _with_param(postgres_url, "schema", schema)
    url = _with_param(url, "options", "-c%20lock_timeout%3D200")
    with psycopg.connect(postgres_url, autocommit=True) as holder, open_store(url) as store:
        # The lock an append to session 's' of this schema takes first.
        holder.execute("SELECT pg_advisory_lock(hashtext(%s), hashtext(%s))", (schema, "s"))
        with pytest.raises(StoreUnavailableError, match="canceled an append to session 's'"):
            store.append("s", [NewEvent("turn", {"n": 2})])
        holder.execute("SELECT pg_advisory_unlock(hashtext(%s), hashtext(%s))", (schema, "s"))
        assert store.last_seq("s") == 1
