"""What the Python harnesses share: bench/overhead, bench/routing, bench/scale
(through overhead's) and tools/soak.py.

- log(): one line to stderr, flushed (progress and diagnostics; the report goes
  to stdout or a file);
- HarnessError: a setup problem (a missing binary, a process that did not
  start), with the exit status the harness ends with;
- die_with_parent() / child_setup(): run in each child before exec, so that
  the kernel sends it SIGTERM if the harness dies (PR_SET_PDEATHSIG), with an
  optional CPU set and descriptor limit;
- Processes: the children of one run, each in its own session (a Ctrl-C
  reaches the harness only) with its output in WORKDIR/NAME.log, stopped by
  pid and process group on every way out (stop_all(), and at exit whatever
  is still running).

Standard library only; imported by path (each harness puts tools/ on sys.path).
"""
from __future__ import annotations

import atexit
import ctypes
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

EXIT_SETUP = 3         # a missing binary, a bad input file, a process that did not start
EXIT_INTERRUPTED = 130

_PR_SET_PDEATHSIG = 1
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _libc = None


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class HarnessError(Exception):
    def __init__(self, message: str, code: int = EXIT_SETUP):
        super().__init__(message)
        self.code = code


def die_with_parent() -> None:
    """In a child before exec: SIGTERM from the kernel when the harness dies."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def raise_nofile(want: int) -> None:
    """Raises RLIMIT_NOFILE to `want` (the hard limit too when allowed), else
    as high as the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:  # raising the hard limit needs CAP_SYS_RESOURCE
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (want, hard if hard == resource.RLIM_INFINITY else max(hard, want)))
    except (ValueError, OSError):
        try:
            top = want if hard == resource.RLIM_INFINITY else min(want, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))
        except (ValueError, OSError):
            pass


def child_setup(cpus: Optional[set[int]] = None, nofile: Optional[int] = None) -> Callable[[], None]:
    """A preexec_fn: CPU affinity, descriptor limit, then die_with_parent()."""
    def setup() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)
        if nofile:
            raise_nofile(nofile)
        die_with_parent()
    return setup


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    logpath: Path


_LIVE: dict[int, Child] = {}  # every started child not yet stopped, by pid


class Processes:
    """The children of one run. `error` is the exception class a harness
    raises for them (a HarnessError)."""

    def __init__(self, workdir: Path, error: type = HarnessError):
        self.workdir = workdir
        self.error = error
        self.children: dict[str, Child] = {}

    def start(self, name: str, argv: list[str], cpus: Optional[set[int]] = None,
              nofile: Optional[int] = None, env: Optional[dict] = None) -> Child:
        logpath = self.workdir / f"{name}.log"
        with open(logpath, "wb") as out:
            try:
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=child_setup(cpus, nofile),
                                     cwd=str(self.workdir), env=env, close_fds=True)
            except OSError as e:
                raise self.error(f"cannot start {name} ({argv[0]}): {e}")
        c = Child(name, p, logpath)
        self.children[name] = c
        _LIVE[p.pid] = c
        return c

    def log_tail(self, name: str, limit: int = 4000) -> str:
        """The end of NAME's output (at most `limit` characters)."""
        try:
            text = (self.workdir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""
        return text if len(text) <= limit else "...\n" + text[-limit:]

    def check_alive(self, code: int = EXIT_SETUP) -> None:
        """Raises `error` (exit status `code`) if a child has exited."""
        for c in self.children.values():
            if c.proc.poll() is not None:
                raise self.error(f"{c.name} exited with status {c.proc.returncode}; its output:\n"
                                 f"{self.log_tail(c.name)}", code)

    def stop(self, name: str, timeout: float = 5.0) -> None:
        c = self.children.pop(name, None)
        if c is not None:
            _stop([c], timeout)

    def stop_all(self, timeout: float = 5.0) -> None:
        """SIGTERM to all (the last started first), then up to `timeout` for
        all of them together, then SIGKILL."""
        children = list(reversed(self.children.values()))
        self.children.clear()
        _stop(children, timeout)


def _stop(children: list[Child], timeout: float) -> None:
    for c in children:
        if c.proc.poll() is None:
            try:
                c.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    for c in children:
        try:
            c.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            c.proc.kill()
            c.proc.wait()
        # The process group is the child's own (start_new_session): whatever
        # it forked (nginx workers) and left behind goes too.
        try:
            os.killpg(c.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _LIVE.pop(c.proc.pid, None)


def stop_leftovers() -> None:
    """Stops every child still running (also run at exit)."""
    _stop(list(_LIVE.values()), timeout=2.0)


atexit.register(stop_leftovers)
