"""A throwaway PostgreSQL cluster that a test may stop, crash and restart.

Fault tests must never stop the shared test server (other runs use it at the same time), so each gets a
cluster of its own: `initdb` into a temporary directory, a free loopback port, its unix socket inside that
directory, trust authentication on loopback. As root, the server binaries run as the `postgres` OS user
(`runuser`), since Postgres refuses to run as root; any other user runs them as itself.

The binaries come from `PG_BIN_DIR` or `/usr/lib/postgresql/15/bin`. Without them the test is skipped,
or fails under `REQUIRE_REAL_SERVICES=1` (tests/support/postgres.py's convention).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live_server import free_port
from tests.support.postgres import service_missing

DEFAULT_BIN_DIR = Path("/usr/lib/postgresql/15/bin")
START_TIMEOUT_S = 60


def _bin_dir() -> Path:
    return Path(os.environ.get("PG_BIN_DIR") or DEFAULT_BIN_DIR)


def _run_as() -> list[str]:
    """The command prefix that runs a server binary as a user Postgres accepts."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        service_missing("running as root needs runuser to start a private Postgres as the postgres user")
    return [str(runuser), "-u", "postgres", "--"]


class PgCluster:
    """One private cluster. `init()` once, then `start()` / `stop()` as often as the test needs."""

    def __init__(self, root: Path, port: int, bin_dir: Path, run_as: list[str]) -> None:
        self.root = root
        self.port = port
        self.data = root / "data"
        self.log = root / "postgres.log"
        self._bin = bin_dir
        self._run_as = run_as

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?sslmode=disable"

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        # Appended settings win over initdb's. fsync off: only the test's data, and a crash here is a process
        # crash (the OS keeps the written pages), never a power loss.
        settings = (
            f"port = {self.port}\n"
            "listen_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{self.root}'\n"
            "fsync = off\n"
            "max_connections = 40\n"
        )
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(settings)

    def start(self) -> None:
        """Start and wait until it accepts connections."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(START_TIMEOUT_S), "start")

    def stop(self, mode: str = "fast") -> None:
        """`fast` disconnects every client and shuts down cleanly; `immediate` is a crash (recovery on start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    @property
    def running(self) -> bool:
        result = subprocess.run(
            [*self._run_as, str(self._bin / "pg_ctl"), "-D", str(self.data), "status"],
            capture_output=True,
            check=False,
        )
        return result.returncode == 0

    def destroy(self) -> None:
        if self.data.exists() and self.running:
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        result = subprocess.run(
            [*self._run_as, str(self._bin / program), *args], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{program} {' '.join(args)} failed:\n{result.stdout}{result.stderr}\n{log}")


def new_cluster() -> PgCluster:
    """A cluster directory with `initdb` done, not started."""
    bin_dir = _bin_dir()
    if not (bin_dir / "initdb").is_file() or not (bin_dir / "pg_ctl").is_file():
        service_missing(f"no PostgreSQL server binaries in {bin_dir} for a private cluster (set PG_BIN_DIR)")
    run_as = _run_as()
    root = Path(tempfile.mkdtemp(prefix="graphrag-pg-"))
    if run_as:
        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
    cluster = PgCluster(root, free_port(), bin_dir, run_as)
    try:
        cluster.init()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return cluster


@pytest.fixture
def pg_cluster() -> Iterator[PgCluster]:
    """A private cluster, initialised but not started; stopped and removed afterwards."""
    cluster = new_cluster()
    try:
        yield cluster
    finally:
        cluster.destroy()
