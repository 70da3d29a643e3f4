"""What the Python harnesses share: bench/overhead, bench/routing, bench/scale
(through overhead's) and tools/soak.py.

- log(): one line to stderr, flushed (progress and diagnostics; the report goes
  to stdout or a file);
- HarnessError: a setup problem (a missing binary, a process that did not
  start), with the exit status the harness ends with;
- die_with_parent() / child_setup(): run in each child before exec, so that
  the kernel sends it SIGTERM if the harness dies (PR_SET_PDEATHSIG), with an
  optional CPU set and descriptor limit. Children also get their own session
  (start_new_session=True at the call site): a Ctrl-C reaches the harness
  only, and the harness stops them on every way out.

Standard library only; imported by path (each harness puts tools/ on sys.path).
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
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
