"""A Neo4j server of the test's own, which it may kill and start again.

The shared Neo4j test server must never go down under other test runs, so a fault test starts a second one
with `scripts/services/neo4j.sh` (its own data directory under the given work dir, its own free port; the
script prints how to reach it). `kill()` takes it down the hard way (SIGKILL); `restart()` runs the very
same command line again (same data directory and port), so the service under test sees the server come
back where it was. Java and the script's build come first; without Java the test is skipped, or fails
under `REQUIRE_REAL_SERVICES=1`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.support.live_server import ROOT
from tests.support.postgres import service_missing

SCRIPT = ROOT / "scripts" / "services" / "neo4j.sh"
START_TIMEOUT_S = 180


class PrivateNeo4j:
    def __init__(self, workdir: Path) -> None:
        self._workdir = workdir
        self.uri = ""
        self.pid = 0
        self.state_dir: Path | None = None
        self._command: list[str] = []
        self._cwd = ""
        self._restarted: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if shutil.which("java") is None:
            service_missing("no Java for a private Neo4j server (scripts/services/neo4j.sh needs Java 17+)")
        env = {name: value for name, value in os.environ.items() if not name.startswith("NEO4J_TEST_")}
        env["TMPDIR"] = str(self._workdir)
        result = subprocess.run(
            ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=START_TIMEOUT_S + 60, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"neo4j.sh failed:\n{result.stderr[-3000:]}")
        exported = dict(re.findall(r"^export (\w+)=(\S+)$", result.stdout, re.M))
        self.uri = exported["NEO4J_TEST_URI"]
        self.pid = int(exported["NEO4J_TEST_PID"])
        self.state_dir = Path(exported["NEO4J_TEST_DIR"])
        # What the script ran, to run it again on the same data directory and port.
        self._command = Path(f"/proc/{self.pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")
        self._cwd = os.readlink(f"/proc/{self.pid}/cwd")

    def kill(self) -> None:
        """Take the server down at once, as a crash would; returns when the process is gone."""
        os.kill(self.pid, signal.SIGKILL)
        if self._restarted is not None and self._restarted.pid == self.pid:
            self._restarted.wait(30)
            return
        deadline = time.monotonic() + 30
        while _alive(self.pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"Neo4j (pid {self.pid}) survived SIGKILL for 30 s")
            time.sleep(0.05)

    def restart(self) -> None:
        """Start the same server again (same data directory and port) and wait until Bolt answers."""
        assert self.state_dir is not None, "start() first"
        log = self.state_dir / "neo4j.log"
        offset = log.stat().st_size
        with log.open("ab") as output:
            self._restarted = subprocess.Popen(
                self._command,
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                start_new_session=True,
            )
        self.pid = self._restarted.pid
        deadline = time.monotonic() + START_TIMEOUT_S
        while b"\nREADY " not in b"\n" + log.read_bytes()[offset:]:
            if self._restarted.poll() is not None:
                raise RuntimeError(f"Neo4j exited on restart:\n{log.read_text(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Neo4j did not answer within {START_TIMEOUT_S} s of a restart")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server (if it runs) and remove its data directory."""
        if self.pid and _alive(self.pid):
            self.kill()
        if self.state_dir is not None:
            shutil.rmtree(self.state_dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has exited; only its parent has not reaped it yet
