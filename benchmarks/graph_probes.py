"""Measuring tools shared by the benchmarks: per-stage wall time, RSS and CPU of processes, percentiles, ratios,
the machine, the result file and progress lines.

Nothing here changes what the product does: `StageClock` shadows methods of already-built objects with
timed pass-throughs (instance attributes, removed again by `restore`), and the process probes only read /proc.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import os
import platform
import sys
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from datetime import datetime
from pathlib import Path
from typing import Any

# -- per-stage wall time --------------------------------------------------------------------------------------


class StageClock:
    """Inclusive wall time of every call of the wrapped methods, keyed by call path ("document/embed").

    The path is the stack of wrapped calls in progress in the calling task (a context variable, which a task
    copies when it is created), so calls running side by side in different tasks each get their own path: the
    indexer writes one batch in a task while it stages the next. Retrieval runs many wrapped calls at once in
    one task's children, so the clock is restored before it. Time spent in worker threads counts in the
    awaiting call, as it should. Overlapping calls of one path are one busy period (`calls` holds busy periods);
    different paths that overlap (a batch written while the next is staged) add up to more than the wall time.
    """

    def __init__(self) -> None:
        self.calls: dict[str, list[float]] = defaultdict(list)
        self.items: dict[str, int] = defaultdict(int)  # e.g. texts embedded, when `wrap` was given `size`
        self._stack: ContextVar[tuple[str, ...]] = ContextVar(f"stage_clock_{id(self)}", default=())
        self._running: dict[str, int] = defaultdict(int)
        self._since: dict[str, float] = {}
        self._wrapped: list[tuple[object, str]] = []

    def wrap(self, owner: object, attr: str, label: str | None = None, size: Callable[..., int] | None = None) -> None:
        """Time `owner.attr` (a bound method, sync or async) under `label` (default: its name); with `size`,
        also add `size(*args, **kwargs)` of every call to `items`."""
        original: Callable[..., Any] = getattr(owner, attr)
        name = label or attr
        replacement: Callable[..., Any]
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                with self._timing(name, size(*args, **kwargs) if size else 0):
                    return await original(*args, **kwargs)

            replacement = timed_async
        else:

            @functools.wraps(original)
            def timed(*args: Any, **kwargs: Any) -> Any:
                with self._timing(name, size(*args, **kwargs) if size else 0):
                    return original(*args, **kwargs)

            replacement = timed
        setattr(owner, attr, replacement)  # an instance attribute shadows the class's method
        self._wrapped.append((owner, attr))

    def wrap_exit(self, owner: object, attr: str, label: str) -> None:
        """Time, under `label`, the exit of the async context manager `owner.attr(...)` returns: from the end of
        its body to the end of its `__aexit__` (a store finishing a bulk load)."""
        original: Callable[..., AbstractAsyncContextManager[Any]] = getattr(owner, attr)

        @functools.wraps(original)
        @asynccontextmanager
        async def timed(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            body_done: float | None = None
            try:
                async with original(*args, **kwargs) as value:
                    try:
                        yield value
                    finally:
                        body_done = time.perf_counter()
            finally:
                if body_done is not None:
                    self.calls[label].append(time.perf_counter() - body_done)

        setattr(owner, attr, timed)
        self._wrapped.append((owner, attr))

    def restore(self) -> None:
        for owner, attr in reversed(self._wrapped):
            delattr(owner, attr)  # the class's method shows through again
        self._wrapped.clear()

    def reset(self) -> None:
        self.calls.clear()
        self.items.clear()

    @contextmanager
    def _timing(self, label: str, items: int) -> Iterator[None]:
        stack = (*self._stack.get(), label)
        token = self._stack.set(stack)
        path = "/".join(stack)
        self.items[path] += items
        # Calls of one path that overlap (a batch's extractions run side by side) count as one busy period,
        # so a path's time is the wall time during which at least one of its calls ran.
        if self._running[path] == 0:
            self._since[path] = time.perf_counter()
        self._running[path] += 1
        try:
            yield
        finally:
            self._running[path] -= 1
            if self._running[path] == 0:
                self.calls[path].append(time.perf_counter() - self._since[path])
            self._stack.reset(token)

    def total(self, *paths: str) -> float:
        return sum(sum(self.calls.get(path, ())) for path in paths)

    def count(self, path: str) -> int:
        return len(self.calls.get(path, ()))

    def last(self, path: str) -> float:
        """The duration of the latest call of `path` (0 when there was none)."""
        found = self.calls.get(path)
        return found[-1] if found else 0.0

    def self_time(self, path: str) -> float:
        """`path`'s time minus that of the wrapped calls directly inside it."""
        children = [p for p in self.calls if p.startswith(path + "/") and "/" not in p[len(path) + 1 :]]
        return self.total(path) - self.total(*children)


class RefreshLog(logging.Handler):
    """Collects what `CommunityMaintainer.refresh` logs about each refresh: (communities, summarized, reused).

    Its INFO line is the only place that says how many communities a refresh had to summarize (and so embed)
    anew; the handler keeps those lines from being printed.
    """

    LOGGER = "backend.infrastructure.knowledge.communities"

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.refreshes: list[tuple[int, int, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if str(record.msg).startswith("communities of kb=") and isinstance(args, tuple) and len(args) >= 4:
            self.refreshes.append((int(args[1]), int(args[2]), int(args[3])))  # type: ignore[call-overload]

    def install(self) -> None:
        logger = logging.getLogger(self.LOGGER)
        logger.addHandler(self)
        logger.setLevel(logging.INFO)
        logger.propagate = False

    def take(self) -> dict[str, float]:
        """Means per refresh since the last take."""
        taken, self.refreshes = self.refreshes, []
        if not taken:
            return {"refreshes": 0}
        n = len(taken)
        return {
            "refreshes": n,
            "communities": round(sum(t[0] for t in taken) / n, 1),
            "summarized_and_embedded_anew": round(sum(t[1] for t in taken) / n, 1),
            "reused": round(sum(t[2] for t in taken) / n, 1),
        }


# -- processes (Linux /proc) ------------------------------------------------------------------------------------

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def status_kib(pid: int | str, field: str) -> int:
    """A `kB` field of /proc/<pid>/status (VmRSS, VmHWM); 0 when the process or field is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def cpu_seconds(pid: int | str) -> float:
    """user + system CPU time of a whole process (all threads), from /proc/<pid>/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def listening_pid(port: int) -> int | None:
    """The process with a TCP socket listening on `port` (to find the Neo4j JVM from its Bolt URI)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            parts = row.split()
            if len(parts) > 9 and parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(parts[9])
    if not inodes:
        return None
    targets = {f"socket:[{inode}]" for inode in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in targets for fd in (proc / "fd").iterdir()):
                return int(proc.name)
        except OSError:
            continue  # gone, or not ours to read
    return None


class RssSampler:
    """The highest VmRSS of some processes, sampled every `interval_s` by a daemon thread, per window.

    For this process VmHWM (the kernel's exact peak) is better and is read separately; sampling is what
    there is for another process (the Neo4j JVM) without touching it.
    """

    def __init__(self, pids: dict[str, int], interval_s: float = 0.2) -> None:
        self._pids = pids
        self._interval_s = interval_s
        self._peaks: dict[str, int] = dict.fromkeys(pids, 0)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        with self._lock:
            for name, pid in self._pids.items():
                self._peaks[name] = max(self._peaks[name], status_kib(pid, "VmRSS"))

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample()

    def window(self) -> dict[str, int]:
        """Peak RSS (KiB) of each process since the last window, then start a new window."""
        self._sample()
        with self._lock:
            peaks = dict(self._peaks)
            for name, pid in self._pids.items():
                self._peaks[name] = status_kib(pid, "VmRSS")
        return peaks


# -- figures ------------------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ratio(a: float | None, b: float | None) -> float:
    """a / b to 3 decimals; NaN when either is missing or b is 0."""
    return round(a / b, 3) if a is not None and b else math.nan


def dig(value: Any, *path: Any) -> Any:
    """`value[path[0]][path[1]]...` of a JSON document, or None where a level is missing or not a dict."""
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def spread_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / max / mean of durations given in seconds, in ms."""
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "max_ms": round(max(ms), 2) if ms else math.nan,
        "mean_ms": round(sum(ms) / len(ms), 2) if ms else math.nan,
    }


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
    }


# -- output ---------------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"


def rel(path: Path) -> str:
    """`path` relative to the repository when it is inside it (as messages and the report show it)."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def log(name: str, message: str) -> None:
    """A progress line on stderr, tagged with `name` and the time."""
    print(f"[{name} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def result_path(benchmark: str, quick: bool) -> Path:
    """Where a benchmark writes by default: a quick run never replaces the full figures."""
    return RESULTS_DIR / (f"{benchmark}_quick.json" if quick else f"{benchmark}.json")


def save_result(
    output: Path, benchmark: str, host: dict[str, Any], started: datetime, params: dict[str, Any], results: Any
) -> None:
    """Write a benchmark's JSON document (benchmark, machine, date, parameters, results) and say where."""
    document = {
        "benchmark": benchmark,
        "machine": host,
        "date": started.isoformat(timespec="seconds"),
        "parameters": params,
        "results": results,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {rel(output)} ({results['duration_s']} s)")
