"""Postgres service fixtures (SPEC §12).

Where the server comes from, in order: `POSTGRES_TEST_DSN` / `POSTGRES_DSN`; a throwaway testcontainers
`postgres:15-alpine` when a Docker daemon answers; otherwise the test is skipped — or fails under
`REQUIRE_REAL_SERVICES=1`, so CI cannot go green without having run it.
`scripts/services/postgres.sh` starts a local cluster and prints the `POSTGRES_TEST_DSN` to use.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import pytest

DSN_VARIABLES = ("POSTGRES_TEST_DSN", "POSTGRES_DSN")
POSTGRES_IMAGE = "postgres:15-alpine"


def require_real_services() -> bool:
    return os.environ.get("REQUIRE_REAL_SERVICES") == "1"


def service_missing(message: str) -> None:
    """Skip, or fail when the run promised real services."""
    if require_real_services():
        pytest.fail(f"{message} (REQUIRE_REAL_SERVICES=1, so this is an error, not a skip)", pytrace=False)
    pytest.skip(message)


def docker_answers(timeout_s: float = 2.0) -> tuple[bool, str]:
    """Whether a Docker daemon responds, and why not; imports the Docker SDK only if one may exist."""
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return False, "no DOCKER_HOST and no /var/run/docker.sock"
    try:
        import docker  # type: ignore[import-untyped]  # no stubs; only ping() is used

        client = docker.from_env(timeout=timeout_s)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # any failure means "no usable daemon"; the reason goes into the skip message
        return False, f"Docker daemon did not answer: {type(exc).__name__}: {exc}"
    return True, ""


def with_server_settings(dsn: str, **settings: str) -> str:
    """The DSN with extra query parameters, which asyncpg sends as server settings (e.g. search_path)."""
    parts = urlsplit(dsn)
    query = dict(parse_qsl(parts.query))
    query.update(settings)
    return urlunsplit(parts._replace(query=urlencode(query)))


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A DSN of a Postgres server the tests may create schemas in."""
    for variable in DSN_VARIABLES:
        dsn = os.environ.get(variable)
        if dsn:
            yield dsn
            return
    usable, reason = docker_answers()
    if not usable:
        service_missing(
            f'no Postgres for tests: set POSTGRES_TEST_DSN (e.g. eval "$(scripts/services/postgres.sh)") '
            f"or start Docker for testcontainers ({reason})"
        )
    from testcontainers.community.postgres import PostgresContainer

    with PostgresContainer(POSTGRES_IMAGE, driver=None) as container:
        yield container.get_connection_url()


@pytest.fixture
async def isolated_postgres_dsn(postgres_dsn: str) -> AsyncIterator[str]:
    """`postgres_dsn` pointed at a fresh, uniquely named schema (via search_path); dropped afterwards."""
    schema = f"test_{uuid.uuid4().hex}"
    # DDL takes no parameters; the name is generated here (hex only), never caller input.
    await _admin(postgres_dsn, f'CREATE SCHEMA "{schema}"')
    try:
        yield with_server_settings(postgres_dsn, search_path=schema)
    finally:
        await _admin(postgres_dsn, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _admin(dsn: str, sql: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()
