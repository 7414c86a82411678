"""scripts/stack.sh and PostgreSQL: without PAPERFLOWS_PG_PASSWORD `up` and `db` refuse before anything
starts; `db` (the PostgreSQL part of `up`) creates a LOGIN role that is no superuser, owns both databases
and holds the password of the environment, and refuses a superuser role or a database another role owns."""

from __future__ import annotations

import base64
import hashlib
import hmac
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.e2e.test_server_stack import PG, _admin, _drop, _query
from tests.platform.test_deploy import clean_env, free_port

STACK = REPO / "scripts" / "stack.sh"
# quote, backslash and the characters a connection URL must encode
PASSWORD = "it's a p@ss/w:rd %41 \\ \"#?"


def _stack(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(**{"PAPERFLOWS_STACK_DIR": str(tmp_path / "stack"), "PAPERFLOWS_PYTHON": sys.executable, **extra})
    return subprocess.run([str(STACK), *args], env=env, capture_output=True, text=True, timeout=120)


def _scram_matches(verifier: str, password: str) -> bool:
    """Whether a PostgreSQL SCRAM-SHA-256 verifier (pg_authid.rolpassword) was made from `password`."""
    method, params, keys = verifier.split("$")
    iterations, salt = params.split(":")
    stored_key = base64.b64decode(keys.split(":")[0])
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(salt), int(iterations))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    return method == "SCRAM-SHA-256" and hmac.compare_digest(hashlib.sha256(client_key).digest(), stored_key)


@pytest.fixture()
def names() -> Iterator[dict[str, str]]:
    """A role and two database names of this test only, dropped afterwards."""
    if shutil.which("psql") is None or shutil.which("pg_isready") is None:
        pytest.skip("the PostgreSQL client (psql, pg_isready) is missing")
    ready = subprocess.run(["pg_isready", "-q", "-h", PG["host"], "-p", str(PG["port"]), "-U", PG["user"]])
    if ready.returncode != 0:
        pytest.skip(f"no PostgreSQL on {PG['host']}:{PG['port']}")
    tag = uuid.uuid4().hex[:8]
    chosen = {"PAPERFLOWS_PG_USER": f"paperflows_test_{tag}", "PAPERFLOWS_PREFECT_DB": f"paperflows_test_prefect_{tag}",
              "PAPERFLOWS_MLFLOW_DB": f"paperflows_test_mlflow_{tag}"}
    try:
        yield chosen
    finally:
        _drop(chosen["PAPERFLOWS_PREFECT_DB"])
        _drop(chosen["PAPERFLOWS_MLFLOW_DB"])
        _admin(f'DROP ROLE IF EXISTS "{chosen["PAPERFLOWS_PG_USER"]}"')


def _owners(*databases: str) -> dict[str, str]:
    return dict(_query("postgres", "SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname = ANY(%s)",
                       list(databases)))


@pytest.mark.parametrize("command", ["up", "db"])
@pytest.mark.parametrize("password", [None, ""])
def test_without_a_password_it_refuses_before_starting_anything(tmp_path: Path, command: str,
                                                                password: str | None) -> None:
    # neither the interpreter nor a PostgreSQL server exists: touching either would fail differently
    extra = {"PAPERFLOWS_PYTHON": str(tmp_path / "no-python"), "PAPERFLOWS_PG_PORT": str(free_port())}
    if password is not None:
        extra["PAPERFLOWS_PG_PASSWORD"] = password
    started = time.monotonic()
    result = _stack(tmp_path, command, **extra)
    assert time.monotonic() - started < 10
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "set PAPERFLOWS_PG_PASSWORD" in result.stderr, result.stderr
    assert not (tmp_path / "stack").exists()  # no pid or log folder: nothing was started


def test_db_creates_a_login_role_that_is_no_superuser_and_owns_both_databases(tmp_path: Path,
                                                                              names: dict[str, str]) -> None:
    role, prefect_db, mlflow_db = names["PAPERFLOWS_PG_USER"], names["PAPERFLOWS_PREFECT_DB"], names["PAPERFLOWS_MLFLOW_DB"]
    first = _stack(tmp_path, "db", PAPERFLOWS_PG_PASSWORD=PASSWORD, **names)
    assert first.returncode == 0, first.stderr
    assert f"creating role {role}" in first.stderr and f"creating database {prefect_db}" in first.stderr
    attributes = _query("postgres", "SELECT rolsuper, rolcanlogin, rolcreatedb, rolcreaterole, rolreplication, "
                                    "rolbypassrls FROM pg_roles WHERE rolname = %s", role)
    assert attributes == [(False, True, False, False, False, False)]
    assert _owners(prefect_db, mlflow_db) == {prefect_db: role, mlflow_db: role}
    verifier = _query("postgres", "SELECT rolpassword FROM pg_authid WHERE rolname = %s", role)[0][0]
    assert _scram_matches(verifier, PASSWORD), verifier  # the literal arrived intact, quote and backslash too

    # the role works in its database as its owner
    import psycopg2

    with psycopg2.connect(dbname=prefect_db, host=PG["host"], port=PG["port"], user=role, password=PASSWORD) as conn, \
            conn.cursor() as cur:
        cur.execute("CREATE TABLE probe (id int)")
        cur.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'probe'")
        assert cur.fetchall() == [(role,)]

    # again, with another password: the role is updated, nothing is created twice
    again = _stack(tmp_path, "db", PAPERFLOWS_PG_PASSWORD="another one", **names)
    assert again.returncode == 0, again.stderr
    assert f"updating role {role}" in again.stderr and "creating" not in again.stderr
    verifier = _query("postgres", "SELECT rolpassword FROM pg_authid WHERE rolname = %s", role)[0][0]
    assert _scram_matches(verifier, "another one") and not _scram_matches(verifier, PASSWORD)


def test_db_refuses_a_superuser_role_and_leaves_it_alone(tmp_path: Path, names: dict[str, str]) -> None:
    result = _stack(tmp_path, "db", PAPERFLOWS_PG_PASSWORD=PASSWORD, **{**names, "PAPERFLOWS_PG_USER": PG["user"]})
    assert result.returncode == 1 and f"role {PG['user']} is a superuser" in result.stderr, result.stderr
    assert _query("postgres", "SELECT rolsuper FROM pg_roles WHERE rolname = %s", PG["user"]) == [(True,)]
    assert _owners(names["PAPERFLOWS_PREFECT_DB"], names["PAPERFLOWS_MLFLOW_DB"]) == {}


def test_db_refuses_a_database_that_another_role_owns(tmp_path: Path, names: dict[str, str]) -> None:
    prefect_db = names["PAPERFLOWS_PREFECT_DB"]
    _admin(f'CREATE DATABASE "{prefect_db}"')
    result = _stack(tmp_path, "db", PAPERFLOWS_PG_PASSWORD=PASSWORD, **names)
    assert result.returncode == 1 and f"database {prefect_db} belongs to {PG['user']}" in result.stderr, result.stderr
    assert _owners(prefect_db) == {prefect_db: PG["user"]}
