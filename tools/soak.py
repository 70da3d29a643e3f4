#!/usr/bin/env python3
"""Soak test for llmgate: mixed traffic with injected faults for a bounded time.

Starts three llmgate-sim processes (one healthy, one with stream faults, one
answering 5xx/429 errors) and an llmgate with two workers in front, then runs
C concurrent clients for N seconds: streaming and non-streaming requests,
keep-alive reuse, clients that go away before or during the answer, slow
readers and bad requests. Every request is classified; a hang, a malformed
response or a stream that ends with neither [DONE] nor an error event fails
the run. Meanwhile the gateway's resident memory and open file descriptors are
sampled every second; the run fails if they keep growing. After the traffic,
every connection must close and every request in flight end, and SIGTERM must
drain the gateway to exit status 0. See docs/soak.md.

    python3 tools/soak.py                   # 60 s, 16 clients (CI)
    python3 tools/soak.py --seconds 600     # by hand
    python3 tools/soak.py --self-test       # checks the detectors and classifiers (~5 s)

Python 3.9+ standard library only. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402  (tools/harness.py: log, errors, child setup)

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
MiB = 1024 * 1024

# Gateway settings the checks depend on.
TIMEOUT_TOTAL_S = 10.0
DRAIN_TIMEOUT_S = 5.0
CLIENT_IDLE_TIMEOUT_S = 3.0

# A request that has not finished this long after it was sent is stuck: the
# gateway's own total timeout is 10 s (slow readers get longer).
REQUEST_DEADLINE_S = TIMEOUT_TOTAL_S + 5.0
SLOW_READER_DEADLINE_S = TIMEOUT_TOTAL_S + 10.0

# Leak criteria (see detect_growth and docs/soak.md). The gateway's RSS under
# this traffic is about 11 MiB and moves by under 1 MiB from second to second.
RSS_REL_TOL = 0.25          # the last third's median may exceed the middle third's by 25% ...
RSS_ABS_TOL = 4 * MiB       # ... or 4 MiB, whichever is more (--rss-tolerance-mib)
FD_ABS_TOL = 50             # open fds: the last third may exceed the middle third by 50
FD_IDLE_SLACK = 4           # after the traffic, fds other than upstream sockets: before + this
POOL_IDLE_TIMEOUT_S = 5.0   # providers[].pool.idle_timeout: idle upstream connections must close
SETTLE_TIMEOUT_S = 20.0     # after the traffic, connections and in-flight counts must clear by then


log = harness.log


class SoakError(harness.HarnessError):
    """Setup failed (a binary missing, a process that did not start)."""


# ---------------------------------------------------------------------------
# Providers and the gateway config.

# Three simulated providers. Fault profiles apply to a share of requests
# (fault_rate); error profiles answer a share with a status at once.
SIMS: dict[str, dict[str, dict]] = {
    "good": {
        "good": {"ttft_ms": {"dist": "lognormal", "mean": 80, "stddev": 30}, "tps": 400,
                 "output_tokens": {"min": 8, "max": 48}},
        "slow": {"ttft_ms": {"dist": "lognormal", "mean": 300, "stddev": 100}, "tps": 30,
                 "output_tokens": {"min": 4, "max": 20}},
        # Long fast answers, read by slow readers: backpressure through the gateway.
        "long": {"ttft_ms": 50, "tps": 3000, "output_tokens": {"min": 100, "max": 300}},
    },
    "flaky": {
        "stall-first": {"ttft_ms": 80, "tps": 300, "stall_before_first_token_ms": 600000,
                        "fault_rate": 0.15},
        "cut": {"ttft_ms": 80, "tps": 300, "cut_after_tokens": 3, "fault_rate": 0.2},
        "malformed": {"ttft_ms": 80, "tps": 300, "malformed_after_tokens": 2, "fault_rate": 0.15},
        "stall-mid": {"ttft_ms": 80, "tps": 300, "stall_after_tokens": 4, "stall_ms": 2500,
                      "fault_rate": 0.1},
        "cut-first": {"ttft_ms": 80, "tps": 300, "cut_after_tokens": 0, "fault_rate": 0.15},
    },
    "errors": {
        "e503": {"ttft_ms": 100, "tps": 200, "error_rate": 0.25, "error_status": 503},
        "e429": {"ttft_ms": 100, "tps": 200, "error_rate": 0.25, "error_status": 429,
                 "retry_after_s": 1},
        "e500": {"ttft_ms": 100, "tps": 200, "error_rate": 0.15, "error_status": 500,
                 "stall_before_first_token_ms": 1500, "fault_rate": 0.1},
    },
}

ALL_DEPLOYMENTS = [(sim, model) for sim, models in SIMS.items() for model in models if model != "long"]
DIRECT_DEPLOYMENTS = [("good", "good"), ("flaky", "cut"), ("flaky", "malformed"), ("flaky", "stall-mid"),
                      ("errors", "e503"), ("errors", "e429")]

# Public models: round robin over everything (each fault is hit), the latency
# policy with hedging, no fallbacks (errors reach the client), long answers.
PUBLIC_MODELS = {
    "soak-mix": ({"policy": "round_robin"}, ALL_DEPLOYMENTS),
    "soak-latency": ({"policy": "latency", "hedging": {"enabled": True}}, ALL_DEPLOYMENTS),
    "soak-direct": ({"policy": "round_robin", "allow_fallbacks": False}, DIRECT_DEPLOYMENTS),
    "soak-long": ({"policy": "ordered"}, [("good", "long")]),
}


def gateway_config(sim_ports: dict[str, int]) -> str:
    """The gateway's YAML (JSON is valid YAML, so json.dumps writes each value)."""
    q = json.dumps
    lines = [
        "server:",
        f"  listeners: [{{address: {HOST}, port: 0}}]",
        "  workers: 2",
        "  limits:",
        f"    client_idle_timeout: {int(CLIENT_IDLE_TIMEOUT_S)}s",
        "    client_header_timeout: 5s",
        "  drain:",
        "    timeout: %ds" % int(DRAIN_TIMEOUT_S),
        "timeouts: {connect: 500ms, ttft: 1s, idle: 1s, total: %ds}" % int(TIMEOUT_TOTAL_S),
        "routing:",
        "  ejection: {base_duration: 2s, max_duration: 10s}",
        "providers:",
    ]
    for sim, port in sim_ports.items():
        lines += [f"  - name: {sim}",
                  f"    base_url: http://{HOST}:{port}/v1",
                  "    pool: {max_connections: 64, idle_timeout: %ds}" % int(POOL_IDLE_TIMEOUT_S)]
    lines.append("models:")
    for name, (routing, deps) in PUBLIC_MODELS.items():
        lines += [f"  - name: {name}", f"    routing: {q(routing)}", "    deployments:"]
        lines += [f"      - {{provider: {sim}, model: {q(model)}}}" for sim, model in deps]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Child processes: stopped by pid; SIGTERM reaches them if this script dies.

_child_setup = harness.die_with_parent


class Procs(harness.Processes):
    def __init__(self, workdir: Path):
        super().__init__(workdir, SoakError)

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:  # type: ignore[override]
        return super().start(name, argv).proc

    def wait_port(self, name: str, path: Path, timeout: float = 15.0) -> int:
        deadline = time.monotonic() + timeout
        p = self.children[name].proc
        while time.monotonic() < deadline:
            if p.poll() is not None:
                raise SoakError(f"{name} exited with status {p.returncode} before listening:\n"
                                + self.log_tail(name))
            try:
                text = path.read_text().strip()
                if text:
                    return int(text)
            except (OSError, ValueError):
                pass
            time.sleep(0.02)
        raise SoakError(f"{name} wrote no port file within {timeout:.0f} s")


def http_get(port: int, path: str, timeout: float = 3.0) -> bytes:
    with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=timeout) as r:
        return r.read()


def metric_value(text: str, name: str) -> Optional[float]:
    total = None
    for line in text.splitlines():
        if line.startswith(name) and (line[len(name):len(name) + 1] in (" ", "{")):
            total = (total or 0.0) + float(line.rsplit(" ", 1)[1])
    return total


def metric_series(text: str, name: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line[len(name):].rpartition(" ")
            if float(value):
                out[labels] = float(value)
    return out


# ---------------------------------------------------------------------------
# /proc: resident memory, descriptors, the gateway's TCP sockets by state.

TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
              "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def fd_inodes(pid: int) -> tuple[int, set[str]]:
    """Number of open fds and the inodes of the sockets among them."""
    names = os.listdir(f"/proc/{pid}/fd")
    inodes = set()
    for n in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{n}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return len(names), inodes


def tcp_table() -> dict[str, tuple[int, int, str]]:
    """inode -> (local port, remote port, state) for every IPv4/IPv6 TCP socket."""
    out = {}
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if len(cols) < 10 or cols[9] == "0":
                        continue
                    lport = int(cols[1].rsplit(":", 1)[1], 16)
                    rport = int(cols[2].rsplit(":", 1)[1], 16)
                    out[cols[9]] = (lport, rport, TCP_STATES.get(cols[3], cols[3]))
        except OSError:
            pass
    return out


def gateway_sockets(pid: int, gw_port: int, sim_ports: set[int]) -> dict:
    """The gateway's sockets: client side (accepted on its port) and upstream, by state."""
    nfds, inodes = fd_inodes(pid)
    table = tcp_table()
    client: dict[str, int] = {}
    upstream: dict[str, int] = {}
    other = 0
    for ino in inodes:
        entry = table.get(ino)
        if entry is None:
            other += 1  # a unix socket, or one that closed between the two reads
            continue
        lport, rport, state = entry
        if state == "LISTEN":
            continue
        if lport == gw_port:
            client[state] = client.get(state, 0) + 1
        elif rport in sim_ports:
            upstream[state] = upstream.get(state, 0) + 1
        else:
            other += 1
    return {"fds": nfds, "client": client, "upstream": upstream, "other_sockets": other}


class Sampler(threading.Thread):
    """Samples the gateway once a second: RSS, fds, sockets, requests in flight."""

    def __init__(self, pid: int, gw_port: int, sim_ports: set[int], stats):
        super().__init__(daemon=True)
        self.pid, self.gw_port, self.sim_ports, self.stats = pid, gw_port, sim_ports, stats
        self.samples: list[dict] = []
        self.scrape_failures = 0
        self._halt = threading.Event()

    def sample(self) -> dict:
        s = {"t": time.monotonic(), "rss": rss_bytes(self.pid)}
        s.update(gateway_sockets(self.pid, self.gw_port, self.sim_ports))
        s["done"] = self.stats.finished if self.stats else 0
        try:
            s["in_flight"] = metric_value(http_get(self.gw_port, "/metrics", 2.0).decode(),
                                          "llmgate_requests_in_flight")
        except Exception:
            self.scrape_failures += 1
            s["in_flight"] = None
        return s

    def run(self) -> None:
        next_t = time.monotonic()
        while not self._halt.is_set():
            try:
                self.samples.append(self.sample())
            except FileNotFoundError:
                return  # the gateway is gone
            next_t += 1.0
            self._halt.wait(max(0.0, next_t - time.monotonic()))

    def stop(self) -> None:
        self._halt.set()
        self.join()


# ---------------------------------------------------------------------------
# Leak detection on a series sampled once a second.

def detect_growth(series: list[float], abs_tol: float, rel_tol: float = 0.0) -> dict:
    """Does the series keep growing? The first third of the run is warm-up
    (allocator arenas, connection pools and router state fill up); the median
    of the last third is compared with the median of the middle third. It is
    a leak when the growth is above abs_tol and above rel_tol x the middle
    median. Medians make spikes and dips harmless (up to half a window); a
    leak moves the whole last third, by slope x a third of the run."""
    n = len(series)
    if n < 9:
        return {"ok": True, "verdict": "too few samples (%d) to judge" % n, "mid": None, "last": None,
                "growth": 0.0, "limit": abs_tol}
    third = n // 3
    mid, last = statistics.median(series[third:2 * third]), statistics.median(series[2 * third:])
    growth = last - mid
    limit = max(abs_tol, rel_tol * mid)
    leak = growth > limit
    verdict = "GROWING: %+g, over the limit %g" if leak else "flat: %+g (limit %g)"
    return {"ok": not leak, "verdict": verdict % (growth, limit), "mid": mid, "last": last,
            "growth": growth, "limit": limit}


def theil_sen_slope(ts: list[float], ys: list[float]) -> float:
    """Median of the pairwise slopes (y per unit of t): a trend robust to outliers."""
    if len(ts) > 200:  # O(n^2): thin long runs
        step = len(ts) // 200 + 1
        ts, ys = ts[::step], ys[::step]
    slopes = [(ys[j] - ys[i]) / (ts[j] - ts[i])
              for i in range(len(ts)) for j in range(i + 1, len(ts)) if ts[j] != ts[i]]
    return statistics.median(slopes) if slopes else 0.0


# ---------------------------------------------------------------------------
# Response checks: an SSE stream must end in [DONE] or an error event.

class StreamChecker:
    """Fed the de-chunked body of a 200 streaming response, piece by piece."""

    def __init__(self):
        self.buf = b""
        self.done = False
        self.error: Optional[dict] = None
        self.content_events = 0
        self.finish_reason: Optional[str] = None
        self.problem: Optional[str] = None

    def feed(self, data: bytes) -> None:
        self.buf += data.replace(b"\r\n", b"\n") if b"\r" in data else data
        while self.problem is None:
            i = self.buf.find(b"\n\n")
            if i < 0:
                break
            event, self.buf = self.buf[:i], self.buf[i + 2:]
            self._event(event)

    def _event(self, event: bytes) -> None:
        data_lines = []
        for line in event.split(b"\n"):
            if line.startswith(b":") or not line:
                continue
            field, _, value = line.partition(b":")
            if field == b"data":
                data_lines.append(value[1:] if value.startswith(b" ") else value)
        if not data_lines:
            return
        if self.done or self.error is not None:
            self.problem = "an event after %s: %r" % ("[DONE]" if self.done else "the error event",
                                                      event[:120])
            return
        data = b"\n".join(data_lines)
        if data == b"[DONE]":
            if self.finish_reason is None:
                self.problem = "[DONE] without a chunk carrying finish_reason"
            self.done = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            self.problem = "an event that is not JSON: %r" % data[:120]
            return
        if not isinstance(obj, dict):
            self.problem = "an event that is not a JSON object: %r" % data[:120]
        elif "error" in obj:
            err = obj["error"]
            if not (isinstance(err, dict) and isinstance(err.get("message"), str)):
                self.problem = "an error event without error.message: %r" % data[:200]
            self.error = err if isinstance(err, dict) else {}
        elif obj.get("object") != "chat.completion.chunk" or not isinstance(obj.get("choices"), list):
            self.problem = "an event that is not a chat.completion.chunk: %r" % data[:120]
        else:
            for choice in obj["choices"]:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    self.content_events += 1
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]

    def finish(self) -> tuple[str, str]:
        """(class, detail) once the body has ended."""
        if self.problem:
            return "FAIL malformed stream", self.problem
        if self.buf.strip():
            return "FAIL malformed stream", "the body ends inside an event: %r" % self.buf[:120]
        if self.done:
            return "200 stream [DONE]", ""
        if self.error is not None:
            return "200 stream error event", str(self.error.get("code"))
        return "FAIL stream without [DONE] or error event", "%d content events" % self.content_events


def check_error_body(status: int, body: bytes) -> tuple[str, str]:
    try:
        obj = json.loads(body)
        err = obj["error"]
        if isinstance(err.get("message"), str) and isinstance(err.get("type"), str):
            return ("%dxx error" % (status // 100)), "%d %s" % (status, err.get("code") or err["type"])
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return "FAIL malformed error body", "%d %r" % (status, body[:160])


def check_completion_body(body: bytes) -> tuple[str, str]:
    try:
        obj = json.loads(body)
        msg = obj["choices"][0]["message"]
        if obj.get("object") == "chat.completion" and isinstance(msg.get("content"), str):
            return "200 non-stream", ""
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        pass
    return "FAIL malformed completion", repr(body[:160])


# ---------------------------------------------------------------------------
# A small HTTP/1.1 client over asyncio streams.

class HttpError(Exception):
    pass


class Conn:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.requests = 0
        self.idle_since = time.monotonic()
        self.last = ""  # what the previous answer on this connection was
        self.reusable = False

    def close(self, reset: bool = False) -> None:
        try:
            if reset:
                sock = self.writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.writer.transport.abort()
            else:
                self.writer.close()
        except Exception:
            pass


async def open_conn(port: int, rcvbuf: Optional[int] = None) -> Conn:
    if rcvbuf is None:
        reader, writer = await asyncio.open_connection(HOST, port)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (HOST, port))
        except BaseException:
            sock.close()
            raise
        # A small buffer limit: asyncio stops reading the socket when 2x this is buffered.
        reader, writer = await asyncio.open_connection(sock=sock, limit=1024)
    return Conn(reader, writer)


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        raise HttpError("closed inside the response head" if e.partial else "closed before answering")
    except asyncio.LimitOverrunError:
        raise HttpError("response head too large")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise HttpError("bad status line %r" % lines[0][:80])
    try:
        status = int(parts[1])
    except ValueError:
        raise HttpError("bad status line %r" % lines[0][:80])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if parts[0] == "HTTP/1.0":
        headers.setdefault("connection", "close")
    return status, headers


async def body_pieces(reader: asyncio.StreamReader, headers: dict[str, str], piece: int = 65536):
    """Yields the de-chunked body as it arrives."""
    try:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                line = await reader.readuntil(b"\r\n")
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise HttpError("bad chunk size line %r" % line[:40])
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":
                        pass  # trailers
                    return
                while size > 0:
                    data = await reader.readexactly(min(size, piece))
                    size -= len(data)
                    yield data
                if await reader.readexactly(2) != b"\r\n":
                    raise HttpError("chunk not followed by CRLF")
        elif "content-length" in headers:
            left = int(headers["content-length"])
            while left > 0:
                data = await reader.readexactly(min(left, piece))
                left -= len(data)
                yield data
        else:
            while True:
                data = await reader.read(piece)
                if not data:
                    return
                yield data
    except asyncio.IncompleteReadError:
        raise HttpError("connection closed inside the body")
    except asyncio.LimitOverrunError:
        raise HttpError("chunk size line too long")


# ---------------------------------------------------------------------------
# Traffic.

class Stats:
    def __init__(self):
        self.classes: dict[str, int] = {}
        self.details: dict[str, dict[str, int]] = {}
        self.by_scenario: dict[str, int] = {}
        self.failures: list[str] = []
        self.finished = 0
        self.stale_keepalive_retries = 0
        self.reused = 0  # requests sent on a kept-alive connection
        self.durations: dict[str, list[float]] = {}

    def add(self, scenario: str, cls: str, detail: str = "", seconds: float = 0.0) -> None:
        self.finished += 1
        self.durations.setdefault(scenario, []).append(seconds)
        self.classes[cls] = self.classes.get(cls, 0) + 1
        self.by_scenario[scenario] = self.by_scenario.get(scenario, 0) + 1
        if detail and not cls.startswith("FAIL"):
            d = self.details.setdefault(cls, {})
            d[detail] = d.get(detail, 0) + 1
        if cls.startswith("FAIL") and len(self.failures) < 30:
            self.failures.append("%s [%s]: %s" % (cls, scenario, detail))

    @property
    def failed(self) -> int:
        return sum(n for c, n in self.classes.items() if c.startswith("FAIL"))


# Scenario -> weight.
SCENARIOS = {
    "stream": 38,
    "nonstream": 20,
    "abandon-before-answer": 5,
    "abandon-mid-stream": 8,
    "abandon-nonstream": 3,
    "slow-reader": 3,
    "invalid-json": 4,
    "unknown-model": 4,
    "no-messages": 2,
}
STREAM_MODELS = [("soak-mix", 50), ("soak-latency", 25), ("soak-direct", 15), ("soak-long", 10)]
# Bad requests: the expected status.
BAD_REQUESTS = {
    "invalid-json": (b'{"model": "soak-mix", "messages": [', 400),
    "unknown-model": (b'{"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}', 404),
    "no-messages": (b'{"model": "soak-mix"}', 400),
}


def pick(rng: random.Random, table) -> str:
    items = list(table.items()) if isinstance(table, dict) else table
    return rng.choices([k for k, _ in items], weights=[w for _, w in items])[0]


class Client:
    def __init__(self, cid: int, port: int, seed: int, stats: Stats, stop_at: float):
        self.cid, self.port, self.stats, self.stop_at = cid, port, stats, stop_at
        self.rng = random.Random(seed * 7919 + cid)
        self.keepalive = cid % 2 == 0  # half the clients reuse connections
        self.conn: Optional[Conn] = None
        self.last_model = "-"

    async def run(self) -> None:
        while time.monotonic() < self.stop_at:
            scenario = pick(self.rng, SCENARIOS)
            t0 = time.monotonic()
            cls, detail = await self.classified(scenario)
            self.stats.add(scenario, cls, detail, time.monotonic() - t0)
        self.drop()

    async def classified(self, scenario: str, model: Optional[str] = None,
                         deadline: Optional[float] = None) -> tuple[str, str]:
        """One request of this scenario, as (class, detail); never raises."""
        if deadline is None:
            deadline = SLOW_READER_DEADLINE_S if scenario == "slow-reader" else REQUEST_DEADLINE_S
        t0 = time.monotonic()
        try:
            return await asyncio.wait_for(self.one(scenario, model), deadline)
        except asyncio.TimeoutError:
            self.drop()
            return "FAIL hang", "no end after %.1f s (model %s)" % (deadline, self.last_model)
        except (HttpError, ValueError) as e:
            self.drop()
            return "FAIL broken response", "%s after %.2f s (model %s)" % (
                e, time.monotonic() - t0, self.last_model)
        except (OSError, ConnectionError) as e:
            self.drop()
            return "FAIL connection error", "%s: %s (model %s)" % (type(e).__name__, e, self.last_model)

    def drop(self, reset: bool = False) -> None:
        if self.conn is not None:
            self.conn.close(reset)
            self.conn = None

    def body(self, model: str, stream: bool) -> bytes:
        req = {"model": model, "stream": stream,
               "messages": [{"role": "user", "content": "soak %d" % self.rng.randrange(10 ** 6)}]}
        if self.rng.random() < 0.2:
            req["max_tokens"] = self.rng.randint(1, 12)
        if stream and self.rng.random() < 0.3:
            req["stream_options"] = {"include_usage": True}
        return json.dumps(req).encode()

    async def send(self, body: bytes, fresh: bool = False, rcvbuf: Optional[int] = None,
                   keepalive: Optional[bool] = None) -> Conn:
        keepalive = self.keepalive if keepalive is None else keepalive
        if fresh or rcvbuf is not None or not keepalive:
            self.drop()
        if self.conn is None:
            self.conn = await open_conn(self.port, rcvbuf)
        head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n%s\r\n") % (HOST, self.port, len(body),
                                                   "" if keepalive else "Connection: close\r\n")
        self.conn.writer.write(head.encode() + body)
        await self.conn.writer.drain()
        self.conn.requests += 1
        self.conn.reusable = keepalive
        if self.conn.requests > 1:
            self.stats.reused += 1
        return self.conn

    async def request_head(self, body: bytes, **kw) -> tuple[int, dict[str, str]]:
        """Sends and reads the head. A reused keep-alive connection the gateway
        closed after its idle timeout is retried once on a new connection."""
        conn = await self.send(body, **kw)
        reused = conn.requests > 1
        idle = time.monotonic() - conn.idle_since
        try:
            return await read_head(conn.reader)
        except (HttpError, ConnectionError) as e:
            closed_unanswered = isinstance(e, ConnectionResetError) or "before answering" in str(e)
            if reused and closed_unanswered:
                if idle < CLIENT_IDLE_TIMEOUT_S / 2:
                    raise HttpError("keep-alive connection closed %.2f s after the last answer "
                                    "(idle timeout %.0f s; that answer: %s)"
                                    % (idle, CLIENT_IDLE_TIMEOUT_S, conn.last))
                self.stats.stale_keepalive_retries += 1
                self.drop()
                conn = await self.send(body, fresh=True, **kw)
                return await read_head(conn.reader)
            raise

    def after_response(self, headers: dict[str, str], status: int = 200, what: str = "") -> None:
        if self.conn is not None:
            self.conn.last = "%d %s %s" % (status, what, headers.get("x-llmgate-deployment", ""))
        if self.conn is None or not self.conn.reusable or headers.get("connection", "").lower() == "close":
            self.drop()
        elif self.conn is not None:
            self.conn.idle_since = time.monotonic()

    async def read_body(self, headers, piece=65536) -> bytes:
        out = bytearray()
        async for data in body_pieces(self.conn.reader, headers, piece):
            out += data
        return bytes(out)

    async def one(self, scenario: str, model: Optional[str] = None) -> tuple[str, str]:
        rng = self.rng
        self.last_model = "-"
        if scenario in BAD_REQUESTS:
            body, expect = BAD_REQUESTS[scenario]
            status, headers = await self.request_head(body)
            data = await self.read_body(headers)
            self.after_response(headers, status, scenario)
            if status != expect:
                return "FAIL unexpected status", "%s: %d, expected %d: %r" % (scenario, status, expect, data[:120])
            return check_error_body(status, data)

        if model is None:
            model = "soak-long" if scenario == "slow-reader" else pick(rng, STREAM_MODELS)
        self.last_model = model
        stream = scenario not in ("nonstream", "abandon-nonstream")

        if scenario in ("abandon-before-answer", "abandon-nonstream"):
            await self.send(self.body(model, stream), keepalive=False)
            await asyncio.sleep(rng.uniform(0.0, 0.4))
            self.drop(reset=rng.random() < 0.5)
            return "client abandoned", ""

        # A slow reader gets its own connection, closed after the answer: the
        # gateway has written the whole answer into the socket buffers long
        # before it is read, and its keep-alive idle time runs from then.
        rcvbuf = 2048 if scenario == "slow-reader" else None
        status, headers = await self.request_head(self.body(model, stream), rcvbuf=rcvbuf,
                                                  keepalive=False if rcvbuf else None)
        if status != 200:
            data = await self.read_body(headers)
            self.after_response(headers, status, "%s %s" % (scenario, model))
            return check_error_body(status, data)

        if not stream:
            data = await self.read_body(headers)
            self.after_response(headers, status, "%s %s" % (scenario, model))
            return check_completion_body(data)

        if "text/event-stream" not in headers.get("content-type", ""):
            self.drop()
            return "FAIL broken response", "200 stream with content-type %r" % headers.get("content-type")
        checker = StreamChecker()
        abandon_after = rng.randint(0, 5) if scenario == "abandon-mid-stream" else None
        slow = scenario == "slow-reader"
        piece = 512 if slow else 65536
        unpaced = 0
        async for data in body_pieces(self.conn.reader, headers, piece):
            checker.feed(data)
            if checker.problem:
                break
            if abandon_after is not None and checker.content_events > abandon_after:
                self.drop(reset=rng.random() < 0.5)
                return "client abandoned", ""
            if slow:
                # About 32 KiB/s with a pause now and then, always under the gateway's 1 s idle timeout.
                unpaced += len(data)
                if unpaced >= 1024:
                    unpaced = 0
                    await asyncio.sleep(0.6 if rng.random() < 0.02 else 0.03)
        cls, detail = checker.finish()
        self.after_response(headers, status, "%s %s: %s %s" % (scenario, model, cls, detail))
        if cls.startswith("FAIL"):
            detail += " (model %s, x-llmgate-deployment %s)" % (model, headers.get("x-llmgate-deployment"))
            self.drop()
        return cls, detail


async def run_traffic(port: int, seconds: float, concurrency: int, seed: int, stats: Stats) -> float:
    stop_at = time.monotonic() + seconds
    clients = [Client(i, port, seed, stats, stop_at) for i in range(concurrency)]
    t0 = time.monotonic()
    await asyncio.gather(*(c.run() for c in clients))
    return time.monotonic() - t0


# ---------------------------------------------------------------------------
# The run.

def find_bins(bin_dir: Path) -> tuple[Path, Path]:
    gw, sim = bin_dir / "llmgate", bin_dir / "llmgate-sim"
    for b in (gw, sim):
        if not os.access(b, os.X_OK):
            raise SoakError(f"{b} not found or not executable (build first, or pass --bin-dir)")
    return gw, sim


def quiet_sockets(pid: int, gw_port: int, sim_ports: set[int]) -> dict:
    """The gateway's sockets once a probe's own connection has had time to close."""
    time.sleep(0.2)
    return gateway_sockets(pid, gw_port, sim_ports)


def settle(gw_pid: int, gw_port: int, sim_ports: dict[str, int]) -> dict:
    """Waits (bounded) until nothing is in flight in the gateway or the
    providers and the gateway holds no client connection."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    t0 = time.monotonic()
    while True:
        state: dict = {"waited_s": round(time.monotonic() - t0, 1)}
        try:
            state["in_flight"] = metric_value(http_get(gw_port, "/metrics").decode(),
                                              "llmgate_requests_in_flight")
        except Exception as e:
            state["in_flight"] = "scrape failed: %s" % e
        state["sim_in_flight"] = {}
        for name, port in sim_ports.items():
            try:
                state["sim_in_flight"][name] = json.loads(http_get(port, "/admin/stats"))["in_flight"]
            except Exception as e:
                state["sim_in_flight"][name] = "failed: %s" % e
        state["sockets"] = quiet_sockets(gw_pid, gw_port, set(sim_ports.values()))
        state["clear"] = (state["in_flight"] == 0 and all(v == 0 for v in state["sim_in_flight"].values())
                          and not state["sockets"]["client"])
        if state["clear"] or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def start_all(args, procs: Procs, workdir: Path, gw_bin: Path, sim_bin: Path):
    for i, (name, models) in enumerate(SIMS.items()):
        argv = [str(sim_bin), "--listen", f"{HOST}:0", "--seed", str(args.seed + i),
                "--port-file", str(workdir / f"sim-{name}.port")]
        for model, profile in models.items():
            argv += ["--model", f"{model}={json.dumps(profile)}"]
        procs.start(f"sim-{name}", argv)
    sim_ports = {name: procs.wait_port(f"sim-{name}", workdir / f"sim-{name}.port") for name in SIMS}
    cfg = workdir / "llmgate.yaml"
    cfg.write_text(gateway_config(sim_ports))
    chk = subprocess.run([str(gw_bin), "--check-config", str(cfg)], capture_output=True, text=True)
    if chk.returncode != 0:
        raise SoakError("the generated config is rejected: " + chk.stdout + chk.stderr)
    gw = procs.start("llmgate", [str(gw_bin), "--config", str(cfg), "--port-file",
                                 str(workdir / "llmgate.port"), "--log-level", args.log_level,
                                 "--watch-interval", "0"])
    gw_port = procs.wait_port("llmgate", workdir / "llmgate.port")
    for _ in range(100):
        try:
            http_get(gw_port, "/healthz")
            break
        except Exception:
            time.sleep(0.05)
    else:
        raise SoakError("the gateway does not answer /healthz:\n" + procs.log_tail("llmgate"))
    return gw, gw_port, sim_ports


def run(args) -> tuple[list[str], list[str], dict]:
    """Returns (failures, summary lines, report data)."""
    gw_bin, sim_bin = find_bins(Path(args.bin_dir))
    workdir = Path(tempfile.mkdtemp(prefix="llmgate-soak-"))
    procs = Procs(workdir)
    failures: list[str] = []
    notes: list[str] = []
    rss_tol = args.rss_tolerance_mib * MiB
    try:
        gw, gw_port, sim_ports = start_all(args, procs, workdir, gw_bin, sim_bin)
        sim_port_set = set(sim_ports.values())
        base = quiet_sockets(gw.pid, gw_port, sim_port_set)
        base["rss"] = rss_bytes(gw.pid)
        log("soak: llmgate pid %d on port %d, providers %s; %d clients for %.0f s (work directory %s)"
            % (gw.pid, gw_port, sim_ports, args.concurrency, args.seconds, workdir))

        # ---- traffic, sampled
        stats = Stats()
        sampler = Sampler(gw.pid, gw_port, sim_port_set, stats)
        sampler.start()
        cpu0 = os.times()
        t_start = time.monotonic()
        asyncio.run(run_traffic(gw_port, args.seconds, args.concurrency, args.seed, stats))
        t_end = time.monotonic()
        cpu1 = os.times()
        sampler.stop()
        samples = sampler.samples
        gateway_alive = gw.poll() is None
        if not gateway_alive:
            failures.append("the gateway exited during the traffic with status %s" % gw.returncode)

        # ---- after the traffic: requests and client connections clear at once;
        # idle upstream connections close after pool.idle_timeout.
        after, idle, final_rss, metrics = {}, {}, 0, ""
        if gateway_alive:
            after = settle(gw.pid, gw_port, sim_ports)
            # Idle upstream connections must close after pool.idle_timeout; a
            # reaper that sweeps every idle_timeout may take up to twice that.
            idle_deadline = t_end + 2 * POOL_IDLE_TIMEOUT_S + 1.0
            while True:
                idle = quiet_sockets(gw.pid, gw_port, sim_port_set)
                if (not idle["client"] and not idle["upstream"]) or time.monotonic() > idle_deadline:
                    break
                time.sleep(0.5)
            idle["waited_s"] = round(time.monotonic() - t_end, 1)
            try:
                metrics = http_get(gw_port, "/metrics").decode()
            except Exception as e:
                failures.append("/metrics after the traffic: %s" % e)
            final_rss = rss_bytes(gw.pid)

        # ---- SIGTERM: drain and exit 0
        drain_status, drain_s = None, None
        if gw.poll() is None:
            t = time.monotonic()
            gw.send_signal(signal.SIGTERM)
            try:
                drain_status = gw.wait(DRAIN_TIMEOUT_S + 5)
            except subprocess.TimeoutExpired:
                drain_status = "still running after %.0f s" % (DRAIN_TIMEOUT_S + 5)
                gw.kill()
                gw.wait()
            drain_s = time.monotonic() - t

        # ---- verdicts
        if stats.failed:
            failures.append("%d requests failed (first: %s)" % (stats.failed, stats.failures[0]))
        if not any(c.startswith("200") for c in stats.classes):
            failures.append("no request succeeded")
        rss_series = [s["rss"] for s in samples]
        fd_series = [s["fds"] for s in samples]
        rss_v = detect_growth(rss_series, rss_tol, RSS_REL_TOL)
        fd_v = detect_growth(fd_series, FD_ABS_TOL)
        if not rss_v["ok"]:
            failures.append("resident memory keeps growing: median %.1f MiB in the middle third, %.1f MiB "
                            "in the last (limit +%.1f MiB)" % (rss_v["mid"] / MiB, rss_v["last"] / MiB,
                                                              rss_v["limit"] / MiB))
        if not fd_v["ok"]:
            failures.append("open file descriptors keep growing: " + fd_v["verdict"])
        if after and not after["clear"]:
            failures.append("stuck %.0f s after the traffic: requests in flight %s, providers' requests in "
                            "flight %s, client connections %s" % (
                                SETTLE_TIMEOUT_S, after["in_flight"], after["sim_in_flight"],
                                after["sockets"]["client"]))
        if idle:
            upstream_open = sum(idle["upstream"].values())
            if idle["client"]:
                failures.append("client connections still open %.1f s after the traffic: %s"
                                % (idle["waited_s"], idle["client"]))
            if upstream_open:
                msg = ("%d idle upstream connections still open %.1f s after the traffic, past "
                       "pool.idle_timeout (%.0f s): %s" % (upstream_open, idle["waited_s"], POOL_IDLE_TIMEOUT_S,
                                                          idle["upstream"]))
                (notes if args.allow_idle_upstream else failures).append(msg)
            other = idle["fds"] - upstream_open
            base_other = base["fds"] - sum(base["upstream"].values())
            if other > base_other + FD_IDLE_SLACK:
                failures.append("file descriptors not released after the traffic: %d open besides %d upstream "
                                "sockets, %d before the traffic" % (other, upstream_open, base_other))
        if drain_status != 0:
            failures.append("SIGTERM: the gateway ended with %s, expected exit status 0 within %.0f s"
                            % (drain_status, DRAIN_TIMEOUT_S + 5))
        if sampler.scrape_failures > max(3, len(samples) // 10):
            failures.append("%d of %d /metrics scrapes failed during the traffic"
                            % (sampler.scrape_failures, len(samples)))
        gw_log = procs.log_tail("llmgate", 1 << 20)
        log_lines = [l for l in gw_log.splitlines() if " warn " in l or " error " in l]

        # ---- summary
        traffic_s = t_end - t_start
        lines: list[str] = []
        say = lines.append
        total = stats.finished
        say("llmgate soak: %d clients, %.0f s of traffic (+%.1f s for the last requests to end), seed %d"
            % (args.concurrency, args.seconds, max(0.0, traffic_s - args.seconds), args.seed))
        say("requests: %d, %.1f/s" % (total, total / traffic_s if traffic_s else 0))
        for cls in sorted(stats.classes, key=lambda c: (c.startswith("FAIL"), c)):
            say("  %-40s %7d" % (cls, stats.classes[cls]))
            for detail, n in sorted(stats.details.get(cls, {}).items(), key=lambda x: -x[1])[:8]:
                say("      %-36s %7d" % (detail, n))
        say("  requests on reused keep-alive connections: %d; retried because the gateway had closed "
            "the idle connection: %d" % (stats.reused, stats.stale_keepalive_retries))
        say("by scenario: count, seconds p50 / p99 / max")
        for sc, ds in sorted(stats.durations.items()):
            ds = sorted(ds)
            say("  %-24s %6d  %5.2f / %5.2f / %5.2f" % (sc, len(ds), ds[len(ds) // 2],
                                                       ds[min(len(ds) - 1, int(len(ds) * 0.99))], ds[-1]))
        if metrics:
            by_outcome: dict[str, float] = {}
            for labels, v in metric_series(metrics, "llmgate_requests_total").items():
                o = labels.split('outcome="', 1)[1].split('"', 1)[0]
                by_outcome[o] = by_outcome.get(o, 0) + v
            say("gateway requests: " + ", ".join("%s %d" % kv for kv in sorted(by_outcome.items(),
                                                                                key=lambda x: -x[1])))
            attempts: dict[str, float] = {}
            for labels, v in metric_series(metrics, "llmgate_upstream_attempts_total").items():
                o = labels.split('outcome="', 1)[1].split('"', 1)[0]
                attempts[o] = attempts.get(o, 0) + v
            say("gateway upstream attempts: " + ", ".join(
                "%s %d" % kv for kv in sorted(attempts.items(), key=lambda x: -x[1])))
            say("gateway fallbacks %d, hedges %d, ejections %d" % (
                metric_value(metrics, "llmgate_fallbacks_total") or 0,
                metric_value(metrics, "llmgate_hedges_total") or 0,
                metric_value(metrics, "llmgate_router_ejections_total") or 0))

        def first(series):
            return series[0] if series else 0
        say("RSS MiB: before %.1f | first second %.1f | middle third (median) %.1f | last third (median) %.1f"
            " | peak %.1f | after %.1f" % (base["rss"] / MiB, first(rss_series) / MiB, (rss_v["mid"] or 0) / MiB,
                                          (rss_v["last"] or 0) / MiB, max(rss_series or [0]) / MiB,
                                          final_rss / MiB))
        third = len(samples) // 3
        slope = 0.0
        if third >= 3:
            slope = theil_sen_slope([s["t"] for s in samples[third:]], rss_series[third:])
            rate = total / traffic_s if traffic_s else 0
            floor = rss_v["limit"] / max(1.0, (samples[-1]["t"] - samples[0]["t"]) / 3)
            say("  %s; trend after warm-up %+.1f KiB/s; this run catches leaks above ~%.0f KiB/s (~%.1f KiB "
                "per request)" % ("OK" if rss_v["ok"] else "LEAK", slope / 1024, floor / 1024,
                                  floor / 1024 / rate if rate else 0))
        say("open fds: before %d | first second %d | middle third (median) %s | last third (median) %s"
            " | peak %d | after %s" % (base["fds"], first(fd_series), _fmt(fd_v["mid"]), _fmt(fd_v["last"]),
                                       max(fd_series or [0]), idle.get("fds", "-")))
        say("  %s; growth %s (limit +%d)" % ("OK" if fd_v["ok"] else "LEAK", _fmt(fd_v["growth"]), FD_ABS_TOL))
        peak_client = max((sum(s["client"].values()) for s in samples), default=0)
        peak_up = max((sum(s["upstream"].values()) for s in samples), default=0)
        peak_cw = max((s["upstream"].get("CLOSE_WAIT", 0) for s in samples), default=0)
        inflight = [s["in_flight"] for s in samples if s["in_flight"] is not None]
        say("during the traffic: client connections peak %d, upstream connections peak %d (CLOSE_WAIT peak %d), "
            "requests in flight peak %d" % (peak_client, peak_up, peak_cw, max(inflight or [0])))
        if after:
            say("after the traffic: settled in %.1f s: in flight %g, providers in flight %s, client connections "
                "%s" % (after["waited_s"], after["in_flight"] if isinstance(after["in_flight"], float) else -1,
                        after["sim_in_flight"], after["sockets"]["client"] or 0))
        if idle:
            say("  %.1f s after: client connections %s, upstream connections %s, fds %d (before the traffic %d)"
                % (idle["waited_s"], idle["client"] or 0, idle["upstream"] or 0, idle["fds"], base["fds"]))
        say("SIGTERM: exit status %s after %s" % (drain_status, "-" if drain_s is None else "%.2f s" % drain_s))
        ccpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
        say("soak client CPU: %.0f%% of one core; gateway warn/error log lines: %d"
            % (100 * ccpu / traffic_s if traffic_s else 0, len(log_lines)))
        for l in log_lines[:5]:
            say("  " + l[:300])
        if stats.failures:
            say("failed requests (first %d of %d):" % (min(10, len(stats.failures)), stats.failed))
            for f in stats.failures[:10]:
                say("  " + f[:400])
        for n in notes:
            say("note: " + n)
        say("VERDICT: " + ("PASS" if not failures else "FAIL"))
        for f in failures:
            say("  - " + f)
        if failures or args.keep:
            say("logs and config in %s" % workdir)
        data = {"seconds": args.seconds, "traffic_s": traffic_s, "concurrency": args.concurrency,
                "seed": args.seed, "requests": total, "rate": total / traffic_s if traffic_s else 0,
                "classes": stats.classes, "details": stats.details, "by_scenario": stats.by_scenario,
                "rss": {"before": base["rss"], "mid": rss_v["mid"], "last": rss_v["last"],
                        "peak": max(rss_series or [0]), "after": final_rss, "limit": rss_v["limit"],
                        "trend_bytes_per_s": slope, "ok": rss_v["ok"]},
                "fds": {"before": base["fds"], "mid": fd_v["mid"], "last": fd_v["last"],
                        "peak": max(fd_series or [0]), "after": idle.get("fds"), "ok": fd_v["ok"]},
                "after": after, "idle": idle, "drain_status": drain_status, "notes": notes,
                "failures": failures, "verdict": "PASS" if not failures else "FAIL",
                "samples": [{k: s[k] for k in ("t", "rss", "fds", "done", "in_flight", "client", "upstream")}
                            for s in samples]}
        return failures, lines, data
    except BaseException:
        args.keep = True
        log("soak: work directory kept: %s" % workdir)
        raise
    finally:
        procs.stop_all()
        if not (args.keep or failures):
            shutil.rmtree(workdir, ignore_errors=True)


def _fmt(x) -> str:
    return "-" if x is None else "%g" % x


# ---------------------------------------------------------------------------
# Self-test: the detectors on synthetic input and on a process that leaks.

LEAKER = r"""
import os, sys, time
leak = sys.argv[1] == "leak"
held, fds = [], []
held.append(bytearray(8 << 20))                      # 8 MiB at start, like a warmed-up heap
for i in range(10 ** 6):
    if leak:
        held.append(bytearray(1 << 20))              # +1 MiB and +1 fd every 50 ms
        fds.append(os.open("/dev/null", os.O_RDONLY))
    else:
        tmp = bytearray(1 << 20)                     # allocated and freed: flat
        fd = os.open("/dev/null", os.O_RDONLY); os.close(fd)
    for b in held[-2:]:
        b[::4096] = b"x" * len(b[::4096])            # touch the pages: resident
    time.sleep(0.05)
"""


def sample_process(kind: str, seconds: float = 2.0) -> tuple[list[int], list[int]]:
    p = subprocess.Popen([sys.executable, "-c", LEAKER, kind], preexec_fn=_child_setup)
    try:
        time.sleep(0.3)
        rss, fds = [], []
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            rss.append(rss_bytes(p.pid))
            fds.append(fd_inodes(p.pid)[0])
            time.sleep(0.1)
        return rss, fds
    finally:
        p.kill()
        p.wait()


async def fake_gateway_checks(chunk) -> None:
    """The client's verdicts against a scripted server, one behaviour per model name."""
    events = [chunk(), chunk("a"), chunk(finish="stop")]

    def chunked(parts):
        return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)

    def plain(status, body):
        return b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body)

    stream_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    answers = {
        "ok": stream_head + chunked(events + [b"data: [DONE]\n\n"]) + b"0\r\n\r\n",
        "error-event": stream_head + chunked(events[:2] + [b'data: {"error": {"message": "m"}}\n\n'])
        + b"0\r\n\r\n",
        "no-done": stream_head + chunked(events) + b"0\r\n\r\n",
        "cut": stream_head + chunked(events[:2]),
        "html-502": plain(502, b"<html>bad gateway</html>"),
        "json-503": plain(503, b'{"error": {"message": "m", "type": "server_error"}}'),
        "json-200": plain(200, b'{"object": "chat.completion", "choices": [{"message": {"content": "x"}}]}'),
    }

    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                n = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                model = json.loads(await reader.readexactly(n))["model"]
                if model == "hang":
                    await asyncio.sleep(3600)
                writer.write(answers[model])
                await writer.drain()
                if model == "cut":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, HOST, 0)
    port = server.sockets[0].getsockname()[1]
    try:
        client = Client(0, port, 1, Stats(), 0.0)
        expect = {"ok": "200 stream [DONE]", "error-event": "200 stream error event",
                  "no-done": "FAIL stream without [DONE] or error event", "cut": "FAIL broken response",
                  "html-502": "FAIL malformed error body", "json-503": "5xx error", "hang": "FAIL hang"}
        for model, want in expect.items():
            got = await client.classified("stream", model, deadline=0.5)
            assert got[0] == want, (model, got)
        assert (await client.classified("nonstream", "json-200", deadline=0.5))[0] == "200 non-stream"
        assert (await client.classified("nonstream", "ok", deadline=0.5))[0] == "FAIL malformed completion"
        assert (await client.classified("abandon-mid-stream", "ok", deadline=0.5))[0] in (
            "client abandoned", "200 stream [DONE]")
        client.drop()
    finally:
        server.close()


def self_test() -> None:
    rng = random.Random(42)
    n = 60
    # RSS: a warm-up ramp to 11 MiB, then flat with 0.4 MiB noise, 0.7 MiB arena steps and a few spikes.
    flat = [min(11 * MiB, 7.5 * MiB + t * MiB) + (0.7 * MiB if t % 7 < 3 else 0) + rng.gauss(0, 0.4 * MiB)
            for t in range(n)]
    for t in (25, 41, 55):
        flat[t] += 12 * MiB
    v = detect_growth(flat, RSS_ABS_TOL, RSS_REL_TOL)
    assert v["ok"], v
    # An allocator that grows by a step in the middle third and plateaus: +3 MiB.
    step = [20 * MiB + (3 * MiB if t > 30 else 0) + rng.gauss(0, 0.3 * MiB) for t in range(n)]
    assert detect_growth(step, RSS_ABS_TOL, RSS_REL_TOL)["ok"]
    # A leak of 5 KiB per request at 65 requests/s (~325 KiB/s) is caught in 60 s.
    leak = [11 * MiB + t * 65 * 5 * 1024 + rng.gauss(0, 0.4 * MiB) for t in range(n)]
    v = detect_growth(leak, RSS_ABS_TOL, RSS_REL_TOL)
    assert not v["ok"], v
    # 100 KiB/s: under the limit in 60 s, caught in 3 minutes.
    slow = [11 * MiB + t * 100 * 1024 + rng.gauss(0, 0.4 * MiB) for t in range(180)]
    assert detect_growth(slow[:60], RSS_ABS_TOL, RSS_REL_TOL)["ok"]
    assert not detect_growth(slow, RSS_ABS_TOL, RSS_REL_TOL)["ok"]
    # fds: swinging +-25 around the level the concurrency sets: flat. Leaking 3 a second: caught.
    fd_flat = [11 + (40 if t > 0 else 0) + rng.randint(-25, 25) for t in range(n)]
    assert detect_growth(fd_flat, FD_ABS_TOL)["ok"]
    fd_leak = [50 + 3 * t + rng.randint(-10, 10) for t in range(n)]
    assert not detect_growth(fd_leak, FD_ABS_TOL)["ok"]
    assert detect_growth([1.0] * 5, 1)["ok"]  # too short to judge
    assert abs(theil_sen_slope(list(range(20)), [2.0 * t for t in range(20)]) - 2.0) < 1e-9
    # A real process through /proc: one leaking 20 MiB and 20 fds a second, one flat.
    rss, fds = sample_process("leak")
    assert not detect_growth(rss, RSS_ABS_TOL, RSS_REL_TOL)["ok"], rss
    assert not detect_growth(fds, 5)["ok"], fds
    rss, fds = sample_process("flat")
    assert detect_growth(rss, RSS_ABS_TOL, RSS_REL_TOL)["ok"], rss
    assert detect_growth(fds, 5)["ok"], fds

    # Streams.
    def chunk(content=None, finish=None):
        delta = {"content": content} if content else {}
        return ("data: " + json.dumps({"object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n").encode()

    def classify(*parts):
        c = StreamChecker()
        for p in parts:
            for i in range(0, len(p), 7):  # events split across reads
                c.feed(p[i:i + 7])
        return c.finish()[0]

    good = [chunk(), chunk("a"), chunk("b"), chunk(finish="stop")]
    assert classify(*good, b"data: [DONE]\n\n") == "200 stream [DONE]"
    assert classify(*good, b"data: [DONE]\r\n\r\n") == "200 stream [DONE]"
    assert classify(b": keep-alive\n\n", *good, b"data: [DONE]\n\n") == "200 stream [DONE]"
    err = b'data: {"error": {"message": "upstream timed out", "code": "upstream_timeout"}}\n\n'
    assert classify(chunk(), chunk("a"), err) == "200 stream error event"
    assert classify(*good).startswith("FAIL stream without")
    assert classify(chunk(), chunk("a"), b"data: {not json\n\n").startswith("FAIL malformed")
    assert classify(*good, b"data: [DONE]\n\n", chunk("late")).startswith("FAIL malformed")
    assert classify(chunk(), chunk("a"), err, b"data: [DONE]\n\n").startswith("FAIL malformed")
    assert classify(chunk(), b'data: {"id":"chatcm').startswith("FAIL malformed")
    assert classify(chunk(), chunk("a"), b"data: [DONE]\n\n").startswith("FAIL malformed")  # no finish
    assert classify(b'data: {"error": "x"}\n\n').startswith("FAIL malformed")
    assert check_error_body(503, b'{"error": {"message": "m", "type": "server_error"}}')[0] == "5xx error"
    assert check_error_body(502, b"<html>bad gateway</html>")[0].startswith("FAIL")
    assert check_completion_body(b'{"object": "chat.completion", "choices": [{"message": {"content": ""}}]}'
                                 )[0] == "200 non-stream"
    assert check_completion_body(b'{"object": "chat.completion"}')[0].startswith("FAIL")
    asyncio.run(fake_gateway_checks(chunk))
    m = 'llmgate_requests_in_flight 3\nllmgate_requests_in_flight_x 9\nx{a="1"} 2\nx{a="2"} 5\n'
    assert metric_value(m, "llmgate_requests_in_flight") == 3 and metric_value(m, "x") == 7
    cfg = gateway_config({"good": 1, "flaky": 2, "errors": 3})
    assert "workers: 2" in cfg and "connect: 500ms" in cfg and "soak-direct" in cfg
    print("soak self-test: OK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60, help="traffic duration (default 60)")
    ap.add_argument("--bin-dir", default=str(REPO / "build" / "bin"),
                    help="where llmgate and llmgate-sim are (default build/bin)")
    ap.add_argument("--concurrency", type=int, default=16, help="concurrent clients (default 16)")
    ap.add_argument("--report", help="also write the summary here; JSON with the samples if it ends in .json")
    ap.add_argument("--seed", type=int, default=1, help="seed of the clients and providers (default 1)")
    ap.add_argument("--rss-tolerance-mib", type=float, default=RSS_ABS_TOL / MiB,
                    help="RSS growth allowed from the middle to the last third (default %(default)g; "
                         "25%% of the middle median if that is more)")
    ap.add_argument("--allow-idle-upstream", action="store_true",
                    help="only note, do not fail on, upstream connections still open after pool.idle_timeout")
    ap.add_argument("--log-level", default="warn", help="the gateway's --log-level (default warn)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, config)")
    ap.add_argument("--self-test", action="store_true", help="check the detectors and exit")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0
    if args.seconds <= 0 or args.concurrency <= 0:
        ap.error("--seconds and --concurrency must be positive")
    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)  # stop the children and keep the logs, as Ctrl-C does
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        failures, lines, data = run(args)
    except SoakError as e:
        log("soak: setup failed: %s" % e)
        return 2
    except KeyboardInterrupt:
        log("soak: interrupted")
        return 130
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    if args.report:
        with open(args.report, "w") as f:
            if args.report.endswith(".json"):
                json.dump(data, f, indent=1, default=str)
            else:
                f.write(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
