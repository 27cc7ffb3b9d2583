"""A switchable TCP proxy in front of a real server: stopped, it looks like the server went down (connections
refused, live ones cut); started again, like it came back on the same address."""

from __future__ import annotations

import asyncio
import contextlib
import socket


def closed_port() -> int:
    """A local port nothing listens on (bound once by us, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TcpForwarder:
    """A switchable TCP proxy to the real server: stopping it looks like Postgres going down."""

    def __init__(self, port: int, target_host: str, target_port: int) -> None:
        self.port = port
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in self._writers:
            writer.transport.abort()  # cut live connections like a crashed server would
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        self._writers.update((client_writer, upstream_writer))
        await asyncio.gather(_pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # A reset is how the proxy's connections end when it is stopped; anything else is a real failure.
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    writer.transport.abort()
