"""`python -m backend serve` in a process of its own, so a test can send it real signals.

The child gets a clean environment (only what is given, plus PATH, HOME and the like) and runs in a
directory without a `.env`, so the developer's settings never leak in. Its output goes to a log file the
test can read.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from tests.support.live_server import ROOT, free_port

_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "HF_HOME", "XDG_CACHE_HOME")


class ServeProcess:
    def __init__(self, settings: dict[str, str], workdir: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "serve.log"
        env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
        env |= {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"} | settings
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "backend", "serve", "--port", str(self.port)],
            cwd=workdir,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_until_healthy(self, within_s: float = 90.0) -> None:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.base_url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.1)
        raise RuntimeError(f"serve did not answer /health within {within_s} s:\n{self.log()}")

    def send(self, number: signal.Signals) -> None:
        self.process.send_signal(number)

    def wait(self, within_s: float) -> int:
        return self.process.wait(within_s)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log.close()

    def __enter__(self) -> ServeProcess:
        try:
            self.wait_until_healthy()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
