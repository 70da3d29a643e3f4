#!/usr/bin/env python3
"""Proxy-overhead benchmark for llmgate.

One command measures the same traffic against (a) a cheap upstream directly,
(b) nginx in front of it and (c) llmgate in front of it, for non-streamed and
streamed chat completions, closed loop at 64 connections and open loop at
fixed rates, with the same CPU pinning for every target: the load generator
(build/bin/llmgate-loadgen) on one core, the server under test and the
upstream on the other. It reports throughput, latency percentiles, the latency
each proxy adds over direct, CPU time per request and RSS, and checks the
targets. See README.md next to this file.

Python 3.9+ standard library plus PyYAML.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fnmatch
import grp
import http.client
import json
import os
import platform
import pwd
import re
import resource
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import harness  # noqa: E402  (tools/harness.py: log, errors, child setup)

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("run.py needs PyYAML (pip install pyyaml, or apt-get install python3-yaml)")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
HOST = "127.0.0.1"
PATH = "/v1/chat/completions"

EXIT_OK = 0
EXIT_SETUP = 3        # a missing binary, nginx not installable, a server that did not start or answer
EXIT_DIED = 4         # a server under test exited during the run
EXIT_INTERRUPTED = 130

OTHER_WORK = 0.15     # a core this busy with work not ours gets a note in the table
NOFILE = 65536        # RLIMIT_NOFILE of every child (servers and load generator)

TARGETS = ("direct", "nginx", "llmgate")
KINDS = ("nonstream", "stream")


# log, the setup error and the child setup are shared by the harnesses (tools/harness.py).
BenchError = harness.HarnessError
log = harness.log


# ---------------------------------------------------------------------------
# Child processes. Each gets its CPU set, a raised RLIMIT_NOFILE and
# PR_SET_PDEATHSIG (SIGTERM when this script dies), in its own session so a
# Ctrl-C reaches only us; we stop them, by pid (and their own process group,
# for nginx workers), on every way out.

def nofile_limit() -> int:
    """The RLIMIT_NOFILE a child surely gets: NOFILE, or the hard limit if lower."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return NOFILE if hard == resource.RLIM_INFINITY else min(hard, NOFILE)


Child = harness.Child


class Procs(harness.Processes):
    """Children with NOFILE descriptors on the given CPUs; a child that exits
    during a run is EXIT_DIED."""

    def __init__(self, workdir: Path):
        super().__init__(workdir, BenchError)

    def start(self, name: str, argv: list[str], cpus: Optional[set[int]] = None,
              nofile: Optional[int] = NOFILE, env: Optional[dict] = None) -> Child:
        return super().start(name, argv, cpus, nofile, env)

    def check_alive(self, code: int = EXIT_DIED) -> None:
        super().check_alive(code)


_kill_leftovers = harness.stop_leftovers


def _on_signal(signum, frame):  # SIGTERM/SIGHUP behave like Ctrl-C: unwind, clean up
    raise KeyboardInterrupt


# ---------------------------------------------------------------------------
# /proc sampling.

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_tree(pid: int) -> list[int]:
    """pid and its descendants (nginx master and workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                kids = Path(f"/proc/{p}/task/{tid}/children").read_text().split()
                todo += [int(k) for k in kids]
        except OSError:
            continue
    return out


def cpu_of(pids: list[int]) -> dict:
    """CPU time of these processes (all threads): utime+stime from /proc/PID/stat
    (clock ticks) and the scheduler's run time from /proc/PID/task/*/schedstat
    (nanoseconds; more precise, None where the kernel has no schedstat)."""
    ticks, sched_ns = 0, 0
    have_sched = True
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        except (OSError, ValueError, IndexError):
            continue
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                sched_ns += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            have_sched = False
    return {"stat_s": ticks / CLK_TCK, "sched_s": sched_ns / 1e9 if have_sched else None}


def cpu_delta(before: dict, after: dict) -> dict:
    d = {"stat_s": after["stat_s"] - before["stat_s"]}
    d["sched_s"] = (after["sched_s"] - before["sched_s"]
                    if after["sched_s"] is not None and before["sched_s"] is not None else None)
    d["s"] = d["sched_s"] if d["sched_s"] is not None else d["stat_s"]
    return d


# Syscalls by kind, from the kernel's syscall tracepoints (`perf stat`):
# what a proxy asks of the kernel per request or per relayed event, which on
# a loopback benchmark is most of its CPU time.
SYSCALL_KINDS = {"read": ("read", "readv", "recvfrom", "recvmsg"),
                 "write": ("write", "writev", "sendto", "sendmsg"),
                 "wait": ("epoll_wait", "epoll_pwait"),
                 "epoll_ctl": ("epoll_ctl",)}
TRACEFS = (Path("/sys/kernel/tracing/events"), Path("/sys/kernel/debug/tracing/events"))


def parse_perf_syscalls(text: str) -> Optional[dict]:
    """`perf stat -x,` output for raw_syscalls:sys_enter and the
    syscalls:sys_enter_NAME tracepoints -> counts by kind (SYSCALL_KINDS;
    `other` is the rest of the total). None without the total."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) >= 3 and parts[0].strip().isdigit():  # not <not counted> / <not supported>
            counts[parts[2].strip()] = int(parts[0])
    total = counts.get("raw_syscalls:sys_enter")
    if total is None:
        return None
    out = {"total": total}
    for kind, names in SYSCALL_KINDS.items():
        out[kind] = sum(counts.get(f"syscalls:sys_enter_{n}", 0) for n in names)
    out["other"] = total - sum(out[k] for k in SYSCALL_KINDS)
    return out


SYSCALL_COLUMNS = ("total", "read", "write", "wait", "epoll_ctl", "other")
SYSCALL_LEGEND = ("read: read/readv/recv*; write: write/writev/send*; wait: epoll_wait/epoll_pwait; "
                  "other: the rest of the total")


def syscall_table(first: str, rows: list[tuple[str, dict]]) -> list[str]:
    """Markdown rows of syscall counts (SYSCALL_COLUMNS) per request or event."""
    out = [f"| {first} | " + " | ".join(SYSCALL_COLUMNS) + " |", "|---|" + "---:|" * len(SYSCALL_COLUMNS)]
    for label, per in rows:
        out.append(f"| {label} | " + " | ".join(f"{per[k]:.2f}" for k in SYSCALL_COLUMNS) + " |")
    return out


class SyscallCounter:
    """Counts the syscalls of `pids` (all their threads) from start() to
    stop() with `perf stat` on the syscall tracepoints. Needs perf and access
    to tracefs (root); stop() returns None when either is missing. start()
    takes START_S either way, so a window timed around it is the same."""

    START_S = 0.2

    def __init__(self, pids: list[int]):
        self.pids = pids
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> bool:
        if shutil.which("perf") and self.pids:
            try:  # tracefs is root's (0700): not there for others
                events_dir = next((d / "syscalls" for d in TRACEFS if (d / "syscalls").is_dir()), None)
                names = [n for names in SYSCALL_KINDS.values() for n in names
                         if events_dir and (events_dir / f"sys_enter_{n}").exists()]
            except OSError:
                events_dir = None
            if events_dir is not None:
                events = ",".join(["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{n}" for n in names])
                self.proc = subprocess.Popen(["perf", "stat", "-x,", "-e", events, "-p",
                                              ",".join(map(str, self.pids))],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(self.START_S)  # attached before what it should count begins
        return self.proc is not None

    def stop(self) -> Optional[dict]:
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            return None
        return parse_perf_syscalls(err)


def memory_of(pids: list[int]) -> dict:
    rss = hwm = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return {"rss_mib": rss / 1024, "hwm_mib": hwm / 1024}


def core_times() -> dict[int, tuple[int, int]]:
    """Per CPU: (busy, total) clock ticks from /proc/stat."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        m = re.match(r"cpu(\d+)\s+(.*)", line)
        if not m:
            continue
        v = [int(x) for x in m.group(2).split()]
        total = sum(v[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        out[int(m.group(1))] = (total - idle, total)
    return out


def core_busy(before: dict, after: dict, cpu: int) -> Optional[float]:
    if cpu not in before or cpu not in after:
        return None
    busy = after[cpu][0] - before[cpu][0]
    total = after[cpu][1] - before[cpu][1]
    return busy / total if total > 0 else None


# ---------------------------------------------------------------------------
# Small HTTP helpers (setup checks and counters only; the load is the load generator's).

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def http_request(port: int, method: str, path: str, body: Optional[bytes] = None,
                 timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        headers = {"Connection": "close"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def wait_until(what: str, check: Callable[[], bool], procs: Procs, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        procs.check_alive()
        try:
            if check():
                return
        except (OSError, http.client.HTTPException, ValueError) as e:
            last = e
        time.sleep(0.05)
    raise BenchError(f"{what} not ready within {timeout:.0f} s" + (f" (last error: {last})" if last else ""))


def read_port_file(path: Path) -> Optional[int]:
    try:
        text = path.read_text().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------
# Request and response bodies: realistic OpenAI shapes, a fixed 18-token answer.

UPSTREAM_MODEL = "gpt-4o-mini-2024-07-18"
PUBLIC_MODEL = "bench"
ANSWER_TOKENS = ["Sure", "!", " Here", " is", " a", " short", " answer", " to", " your", " question",
                 ":", " the", " proxy", " adds", " very", " little", " latency", "."]
assert len(ANSWER_TOKENS) == 18
PROMPT = "Explain in one sentence what an LLM gateway does."
_ID = "chatcmpl-AbCdEfGh0123456789bench"
_CREATED = 1732350000
_FP = "fp_0ba0d124f1"
_USAGE = {"prompt_tokens": 17, "completion_tokens": len(ANSWER_TOKENS), "total_tokens": 17 + len(ANSWER_TOKENS),
          "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
          "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                        "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def chat_completion_json() -> str:
    return _compact({
        "id": _ID, "object": "chat.completion", "created": _CREATED, "model": UPSTREAM_MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(ANSWER_TOKENS),
                                              "refusal": None, "annotations": []},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": _USAGE, "service_tier": "default", "system_fingerprint": _FP})


def chat_completion_sse() -> str:
    """Role chunk, 18 content chunks, finish chunk, usage chunk, [DONE]: 22 events."""
    def chunk(delta: Optional[dict], finish: Optional[str], usage: Any = None, choices: bool = True) -> str:
        obj = {"id": _ID, "object": "chat.completion.chunk", "created": _CREATED, "model": UPSTREAM_MODEL,
               "service_tier": "default", "system_fingerprint": _FP,
               "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else [],
               "usage": usage}
        return f"data: {_compact(obj)}\n\n"
    events = [chunk({"role": "assistant", "content": "", "refusal": None}, None)]
    events += [chunk({"content": t}, None) for t in ANSWER_TOKENS]
    events.append(chunk({}, "stop"))
    events.append(chunk(None, None, _USAGE, choices=False))
    events.append("data: [DONE]\n\n")
    return "".join(events)


def anthropic_messages_sse() -> str:
    """The same answer as Anthropic's event stream: message_start, the text
    block (start, 18 text_delta, stop), a ping, message_delta, message_stop:
    24 events."""
    def event(obj: dict) -> str:
        return f"event: {obj['type']}\ndata: {_compact(obj)}\n\n"
    events = [event({"type": "message_start", "message": {
        "id": "msg_01AbCdEfGh0123456789bench", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 17, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens": 1}}}),
        event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        event({"type": "ping"})]
    events += [event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}})
               for t in ANSWER_TOKENS]
    events.append(event({"type": "content_block_stop", "index": 0}))
    events.append(event({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                         "usage": {"output_tokens": len(ANSWER_TOKENS)}}))
    events.append(event({"type": "message_stop"}))
    return "".join(events)


def gemini_sse() -> str:
    """The same answer as Gemini's streamGenerateContent?alt=sse: a
    GenerateContentResponse per token, the last with the finish and the
    usage (Google frames them with CRLF): 18 events."""
    def response(text: str, finish: Optional[str] = None, usage: Optional[dict] = None) -> str:
        candidate: dict = {"content": {"role": "model", "parts": [{"text": text}]}}
        if finish:
            candidate["finishReason"] = finish
        obj: dict = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash",
                     "responseId": "tTCwacuEBMvnitYP06qsgQYbench"}
        if usage:
            obj["usageMetadata"] = usage
        return f"data: {_compact(obj)}\r\n\r\n"
    n = len(ANSWER_TOKENS)
    events = [response(t) for t in ANSWER_TOKENS[:-1]]
    events.append(response(ANSWER_TOKENS[-1], "STOP",
                           {"promptTokenCount": 17, "candidatesTokenCount": n, "totalTokenCount": 17 + n}))
    return "".join(events)


def event_stream_message(event_type: str, payload: dict) -> bytes:
    """One AWS event-stream message (application/vnd.amazon.eventstream):
    prelude (total and headers lengths, their CRC32), string headers, the
    payload, the message's CRC32 (zlib's, as providers/event_stream.h)."""
    headers = b""
    for name, value in ((":event-type", event_type), (":content-type", "application/json"),
                        (":message-type", "event")):
        n, v = name.encode(), value.encode()
        headers += bytes([len(n)]) + n + b"\x07" + struct.pack(">H", len(v)) + v
    body = _compact(payload).encode()
    prelude = struct.pack(">II", 16 + len(headers) + len(body), len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


def bedrock_event_stream() -> bytes:
    """The same answer as Bedrock's ConverseStream: messageStart, a
    contentBlockDelta per token, contentBlockStop, messageStop, metadata (22
    messages; Bedrock pads each payload with a "p" of letters)."""
    pad = "abcdefghijklmnopqrstuvwxyzABCDEFGH"
    n = len(ANSWER_TOKENS)
    events = [("messageStart", {"p": pad[:12], "role": "assistant"})]
    events += [("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": t}, "p": pad[:20 - len(t)]})
               for t in ANSWER_TOKENS]
    events += [("contentBlockStop", {"contentBlockIndex": 0, "p": pad[:8]}),
               ("messageStop", {"p": pad[:16], "stopReason": "end_turn"}),
               ("metadata", {"metrics": {"latencyMs": 312}, "p": pad[:4],
                             "usage": {"inputTokens": 17, "outputTokens": n, "totalTokens": 17 + n}})]
    return b"".join(event_stream_message(t, p) for t, p in events)


# The native upstreams profile.py --upstream can put behind llmgate: each
# streams the same answer in its own protocol (Bedrock's binary messages are
# served from a file).
NATIVE_SSE = {"anthropic": anthropic_messages_sse, "gemini": gemini_sse}
NATIVE_BINARY = {"bedrock": bedrock_event_stream}
NATIVE = (*NATIVE_SSE, *NATIVE_BINARY)


def history(kib: int) -> list[dict]:
    """Earlier turns of a conversation, about `kib` KiB of JSON: what an agent
    or a chat product sends with every request."""
    turns: list[dict] = []
    size, i = 0, 0
    while size < kib * 1024:
        text = (f"Turn {i}: the quick brown fox jumps over the lazy dog; then it writes "
                f"`for (int i = 0; i < n; ++i) sum += a[i];` and explains \"why\" in café-style prose.")
        turns.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
        size += len(_compact(turns[-1])) + 1
        i += 1
    return turns


MESSAGES_PATH = "/v1/messages"
MESSAGES_SYSTEM = ("You are a coding agent. Read the files you need with the tools, change them with "
                   "edit_file, and run the tests before you answer.")
MESSAGES_TOOLS = [
    {"name": "read_file", "description": "Read a file of the repository.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "edit_file", "description": "Replace a string in a file.",
     "input_schema": {"type": "object",
                      "properties": {"path": {"type": "string"}, "old": {"type": "string"},
                                     "new": {"type": "string"}},
                      "required": ["path", "old", "new"]}},
]


def agent_history(kib: int) -> list[dict]:
    """Earlier turns of a coding agent's conversation in Anthropic's Messages
    shape, about `kib` KiB of JSON: the assistant's text and tool_use blocks,
    the user's tool_result blocks with file contents."""
    turns: list[dict] = []
    size, i = 0, 0
    while size < kib * 1024:
        path = f"src/module_{i}.cpp"
        turns.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Turn {i}: I will read {path} to see how it sums the array."},
            {"type": "tool_use", "id": f"toolu_{i:08d}", "name": "read_file", "input": {"path": path}}]})
        code = ("// café-style prose, \"quoted\"\n"
                "int sum(const int* a, int n) {\n  int s = 0;\n"
                "  for (int i = 0; i < n; ++i) s += a[i];\n  return s;\n}\n")
        turns.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:08d}", "content": code * 2}]})
        size += len(_compact(turns[-2])) + len(_compact(turns[-1])) + 2
        i += 1
    return turns


def messages_request_body(stream: bool, history_kib: int = 0) -> bytes:
    """A Messages API request as a coding agent sends it: a system block with
    a cache mark, two tools, the conversation so far, the new question."""
    history_turns = agent_history(history_kib)
    if history_turns:  # the conversation ends with the user's turn: a question after the last result
        history_turns[-1]["content"].append({"type": "text", "text": PROMPT})
    else:
        history_turns = [{"role": "user", "content": PROMPT}]
    body: dict = {"model": PUBLIC_MODEL, "max_tokens": 64, "stream": stream,
                  "system": [{"type": "text", "text": MESSAGES_SYSTEM, "cache_control": {"type": "ephemeral"}}],
                  "tools": MESSAGES_TOOLS, "messages": history_turns}
    return _compact(body).encode()


# What the OpenAI SDK (Node) sends besides the load generator's own Host,
# Content-Type and Content-Length: fifteen fields in all, the head a proxy
# parses and forwards for a real client (--sdk-head). The key is no gateway
# key (the benchmark's llmgate has no auth:): llmgate drops it as a client
# credential, nginx passes it on.
SDK_HEADERS = (
    "Connection: keep-alive",
    "Accept: application/json",
    "User-Agent: OpenAI/JS 4.104.0",
    "X-Stainless-Lang: js",
    "X-Stainless-Package-Version: 4.104.0",
    "X-Stainless-OS: Linux",
    "X-Stainless-Arch: x64",
    "X-Stainless-Runtime: node",
    "X-Stainless-Runtime-Version: v18.19.0",
    "Authorization: Bearer sk-bench-0123456789abcdef",
    "X-Stainless-Retry-Count: 0",
    "Accept-Encoding: gzip, deflate",
)


def head_flags(sdk_head: bool) -> list[str]:
    """The load generator's --header flags: the SDK's fields, or none."""
    return [flag for h in SDK_HEADERS for flag in ("--header", h)] if sdk_head else []


def request_body(stream: bool, history_kib: int = 0) -> bytes:
    body: dict = {"model": PUBLIC_MODEL,
                  "messages": [{"role": "system", "content": "You are a helpful assistant."},
                               *history(history_kib),
                               {"role": "user", "content": PROMPT}],
                  "max_tokens": 64, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return _compact(body).encode()


# ---------------------------------------------------------------------------
# nginx: private instances with generated configs, never the system service.

def callgrind_wrapper(workdir: Path, binary: Path) -> Path:
    """A script that runs `binary` under callgrind, dumping into workdir/callgrind.out*.
    It execs: the pid a benchmark watches is valgrind's, running the binary."""
    if not shutil.which("valgrind"):
        raise BenchError("--callgrind needs valgrind (apt-get install valgrind)")
    wrapper = workdir / "llmgate-callgrind"
    wrapper.write_text(f"#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file="
                       f"{workdir / 'callgrind.out'} {binary} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def callgrind_last_dump(workdir: Path) -> tuple[Path, int]:
    """The newest callgrind dump in workdir with totals, and its instruction count."""
    dumps = sorted(workdir.glob("callgrind.out*"), key=lambda f: f.stat().st_mtime)
    for dump in reversed(dumps):
        for line in dump.read_text(errors="replace").splitlines():
            if line.startswith("totals:"):
                return dump, int(line.split()[1])
    raise BenchError("callgrind wrote no dump with totals")


def find_nginx(explicit: Optional[str], install: bool) -> str:
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise BenchError(f"{explicit}: not an executable")
        return explicit
    for cand in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if cand and os.access(cand, os.X_OK):
            return cand
    if not install:
        raise BenchError("nginx is not installed (apt-get install nginx), or pass --nginx PATH")
    if os.geteuid() != 0:
        raise BenchError("nginx is not installed and this is not root: apt-get install nginx, then run again")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")

    def apt(*a: str) -> subprocess.CompletedProcess:
        return subprocess.run(["apt-get", *a], env=env, capture_output=True, text=True)

    # Debian 12: "nginx" is the server itself (nginx-light only adds the echo module).
    pkg = None
    for attempt in range(2):
        for name in ("nginx", "nginx-light"):
            if subprocess.run(["apt-cache", "show", name], capture_output=True).returncode == 0:
                pkg = name
                break
        if pkg or attempt:
            break
        log("apt-get update (to find nginx) ...")
        apt("update")
    if pkg is None:
        raise BenchError("apt-cache knows no nginx package; install nginx by hand or pass --nginx PATH")
    log(f"installing {pkg} (apt-get install -y --no-install-recommends {pkg}); its system service is not used ...")
    r = apt("install", "-y", "--no-install-recommends", pkg)
    if r.returncode != 0:
        raise BenchError(f"apt-get install {pkg} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    for cand in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise BenchError(f"installed {pkg} but found no nginx binary")


def nginx_version(nginx: str) -> str:
    try:
        r = subprocess.run([nginx, "-v"], capture_output=True, text=True, timeout=5)
        return (r.stderr or r.stdout).strip().replace("nginx version: ", "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def nginx_string(s: str) -> str:
    """A single-quoted nginx config string. The bodies hold no '$' (variables)."""
    if "$" in s:
        raise ValueError("nginx strings here may not contain '$'")
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def nginx_return_long(text: str, indent: str) -> str:
    """`return 200 TEXT` for a text longer than one nginx config token may be
    (4 KiB): `set` pieces of whole lines, then return their concatenation."""
    pieces, cur = [], ""
    for line in text.splitlines(keepends=True):
        if cur and len(cur) + len(line) > 3000:
            pieces.append(cur)
            cur = ""
        cur += line
    if cur:
        pieces.append(cur)
    if any(len(p) > 3500 for p in pieces):
        raise ValueError("a line of the body is too long for one nginx config string")
    out = "".join(f"{indent}set $body{i} {nginx_string(p)};\n" for i, p in enumerate(pieces))
    return out + f"{indent}return 200 \"" + "".join(f"$body{i}" for i in range(len(pieces))) + "\";\n"


def nginx_main(prefix: Path, name: str) -> str:
    user = ""
    if os.geteuid() == 0:  # the master runs as root; workers drop to nobody
        try:
            nobody = pwd.getpwnam("nobody")
            user = f"user nobody {grp.getgrgid(nobody.pw_gid).gr_name};\n"
        except KeyError:
            user = ""
    tmp = prefix / f"{name}-tmp"
    return (f"# generated by bench/overhead/run.py\n"
            f"daemon off;\nmaster_process on;\nworker_processes 1;\n{user}"
            f"pid {prefix}/{name}.pid;\nerror_log stderr warn;\nworker_rlimit_nofile {nofile_limit()};\n"
            f"events {{\n    worker_connections {max(1024, min(16384, nofile_limit() - 64))};\n}}\n"
            f"http {{\n"
            f"    access_log off;\n"
            f"    client_body_temp_path {tmp}/body;\n    proxy_temp_path {tmp}/proxy;\n"
            f"    # request bodies in memory (an agent's conversation is tens of KiB; the\n"
            f"    # default 16k would write each one to a temporary file first)\n"
            f"    client_body_buffer_size 1m;\n"
            f"    fastcgi_temp_path {tmp}/fastcgi;\n    uwsgi_temp_path {tmp}/uwsgi;\n    scgi_temp_path {tmp}/scgi;\n"
            f"    # nginx closes a client connection after 1000 requests by default: not here\n"
            f"    keepalive_requests 1000000;\n    keepalive_timeout 300s;\n"
            f"    types {{ }}\n")


def upstream_nginx_conf(prefix: Path, json_port: int, sse_port: int, status_port: int,
                        native_port: int = 0, native: str = "anthropic") -> str:
    if native_port and native in NATIVE_BINARY:
        # nginx serves a file to GET only: a POST's 405 is redirected to the
        # file, which turns the request into a GET.
        stream = prefix / "native-stream.bin"
        stream.write_bytes(NATIVE_BINARY[native]())
        os.chmod(prefix, 0o755)  # nginx's workers (nobody) read it
        native_server = (f"    # {native}'s binary event stream of the same answer for any request\n"
                         f"    server {{\n        listen {HOST}:{native_port};\n"
                         f"        location = /native-stream.bin {{\n            root {prefix};\n"
                         f"            default_type application/vnd.amazon.eventstream;\n        }}\n"
                         f"        location / {{\n            error_page 405 =200 /native-stream.bin;\n"
                         f"            return 405;\n        }}\n    }}\n")
    else:
        native_server = (f"    # {native}'s event stream of the same answer for any request\n"
                         f"    server {{\n        listen {HOST}:{native_port};\n"
                         f"        default_type text/event-stream;\n"
                         f"        location / {{\n            add_header Cache-Control no-cache;\n"
                         f"{nginx_return_long(NATIVE_SSE[native](), '            ')}        }}\n    }}\n"
                         if native_port else "")
    return (nginx_main(prefix, "upstream") + native_server +
            f"    # a fixed chat.completion for any request\n"
            f"    server {{\n        listen {HOST}:{json_port};\n"
            f"        default_type application/json;\n"
            f"        location / {{\n            return 200 {nginx_string(chat_completion_json())};\n        }}\n    }}\n"
            f"    # a fixed chat.completion.chunk stream for any request\n"
            f"    server {{\n        listen {HOST}:{sse_port};\n"
            f"        default_type text/event-stream;\n"
            f"        location / {{\n            add_header Cache-Control no-cache;\n"
            f"{nginx_return_long(chat_completion_sse(), '            ')}        }}\n    }}\n"
            f"    # connection and request counters (stub_status)\n"
            f"    server {{\n        listen {HOST}:{status_port};\n"
            f"        location / {{\n            stub_status;\n        }}\n    }}\n"
            f"}}\n")


def proxy_nginx_conf(prefix: Path, routes: list[tuple[int, int]]) -> str:
    """routes: (listen port, upstream port)."""
    text = nginx_main(prefix, "proxy")
    for listen, up in routes:
        text += (f"    upstream up_{up} {{\n        server {HOST}:{up};\n        keepalive 64;\n"
                 f"        keepalive_requests 1000000;\n        keepalive_timeout 300s;\n    }}\n"
                 f"    server {{\n        listen {HOST}:{listen};\n"
                 f"        location / {{\n            proxy_pass http://up_{up};\n"
                 f"            proxy_http_version 1.1;\n            proxy_set_header Connection \"\";\n"
                 f"            proxy_buffering off;\n        }}\n    }}\n")
    return text + "}\n"


def start_nginx(procs: Procs, nginx: str, name: str, conf: str, workdir: Path, cpus: set[int]) -> Child:
    path = workdir / f"{name}.conf"
    path.write_text(conf)
    (workdir / f"{name}-tmp").mkdir(exist_ok=True)
    r = subprocess.run([nginx, "-t", "-q", "-p", str(workdir), "-c", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"nginx rejected the generated {path}:\n{r.stderr.strip()}\n--- config ---\n{conf}")
    return procs.start(name, [nginx, "-p", str(workdir), "-c", str(path)], cpus)


def stub_status(port: int) -> dict[str, int]:
    """nginx's counters, the asking connection and request included:
    accepts, requests, reading, writing."""
    status, _, body = http_request(port, "GET", "/")
    if status != 200:
        raise BenchError(f"stub_status on port {port} answered {status}")
    text = body.decode()
    nums = text.splitlines()[2].split()
    rw = dict(re.findall(r"(Reading|Writing|Waiting): (\d+)", text))
    return {"accepts": int(nums[0]), "requests": int(nums[2]), "reading": int(rw.get("Reading", 0)),
            "writing": int(rw.get("Writing", 0))}


# ---------------------------------------------------------------------------
# llmgate and llmgate-sim.

def llmgate_config(upstream_port: int, workers: int, pool: int, protocol: str = "openai") -> dict:
    provider = {"name": "upstream", "base_url": f"http://{HOST}:{upstream_port}/v1",
                "pool": {"max_connections": pool, "idle_timeout": "300s"}}
    if protocol != "openai":
        provider["protocol"] = protocol
    if protocol == "bedrock":  # a Bedrock API key (a bearer token) instead of Signature V4
        provider["aws_region"] = "us-east-1"
        provider["api_key_env"] = "BENCH_BEDROCK_API_KEY"
    return {
        "server": {"listeners": [{"address": HOST, "port": 0}], "workers": workers},
        "providers": [provider],
        "models": [{"name": PUBLIC_MODEL, "deployments": [{"provider": "upstream", "model": UPSTREAM_MODEL}]}],
    }


def image_glibc_tunables() -> str:
    """The GLIBC_TUNABLES the container image runs llmgate with (the Dockerfile's
    ENV line), so a benchmark measures the gateway as it ships. An environment
    that sets GLIBC_TUNABLES itself (even to nothing) overrides it:
    `GLIBC_TUNABLES= python3 bench/...` measures glibc's defaults."""
    if "GLIBC_TUNABLES" in os.environ:
        return os.environ["GLIBC_TUNABLES"]
    m = re.search(r"^ENV GLIBC_TUNABLES=(\S*)", (REPO / "Dockerfile").read_text(), re.M)
    return m.group(1) if m else ""


def llmgate_env() -> dict:
    env = dict(os.environ)
    env["GLIBC_TUNABLES"] = image_glibc_tunables()
    env["BENCH_BEDROCK_API_KEY"] = "bench-key"  # llmgate_config's bedrock provider
    return env


def start_llmgate(procs: Procs, binary: Path, name: str, cfg: dict, workdir: Path, cpus: set[int],
                  log_level: str) -> tuple[Child, int]:
    cfg_path = workdir / f"{name}.yaml"
    cfg_path.write_text("# generated by bench/overhead/run.py\n" + yaml.safe_dump(cfg, sort_keys=False))
    port_file = workdir / f"{name}.port"
    child = procs.start(name, [str(binary), "--config", str(cfg_path), "--port-file", str(port_file),
                               "--log-level", log_level, "--watch-interval", "0"], cpus,
                        env=llmgate_env())
    port: Optional[int] = None

    def ready() -> bool:
        nonlocal port
        port = port or read_port_file(port_file)
        return port is not None and http_request(port, "GET", "/readyz")[0] == 200

    try:
        wait_until(f"{name} (/readyz)", ready, procs)
    except BenchError as e:
        raise BenchError(f"{e}\n--- {cfg_path} ---\n{cfg_path.read_text()}--- {name} output ---\n"
                         f"{procs.log_tail(name)}", e.code)
    assert port is not None
    return child, port


def parse_prometheus(text: str) -> dict[str, float]:
    """'name{labels}' -> value (labels as written)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            continue
    return out


def llmgate_metrics(port: int) -> dict[str, float]:
    status, _, body = http_request(port, "GET", "/metrics")
    return parse_prometheus(body.decode(errors="replace")) if status == 200 else {}


def metric_sum(m: dict[str, float], name: str, **labels: str) -> float:
    total = 0.0
    for k, v in m.items():
        base, _, lab = k.partition("{")
        if base != name:
            continue
        if all(f'{lk}="{lv}"' in lab for lk, lv in labels.items()):
            total += v
    return total


def metric_labels(m: dict[str, float], name: str, label: str) -> set[str]:
    out = set()
    for k in m:
        base, _, lab = k.partition("{")
        if base == name:
            mm = re.search(label + r'="([^"]*)"', lab)
            if mm:
                out.add(mm.group(1))
    return out


def start_sim_profile(procs: Procs, binary: Path, workdir: Path, cpus: Optional[set[int]], profile: dict,
                      threads: int = 1, extra: tuple[str, ...] = (), name: str = "sim") -> tuple[Child, int]:
    """llmgate-sim with `profile` as its default, ready (/healthz); shared by
    the overhead, scale and trickle benchmarks."""
    prof_path = workdir / f"{name}-profiles.json"
    prof_path.write_text(json.dumps({"default": profile}))
    port_file = workdir / f"{name}.port"
    child = procs.start(name, [str(binary), "--listen", f"{HOST}:0", "--threads", str(threads), "--profiles",
                               str(prof_path), "--port-file", str(port_file), *extra], cpus)
    port: Optional[int] = None

    def ready() -> bool:
        nonlocal port
        port = port or read_port_file(port_file)
        return port is not None and http_request(port, "GET", "/healthz")[0] == 200

    wait_until("llmgate-sim", ready, procs)
    assert port is not None
    return child, port


def start_sim(procs: Procs, binary: Path, workdir: Path, cpus: set[int], tps: float) -> tuple[Child, int, dict]:
    profile = {"ttft_ms": 0, "tps": tps, "output_tokens": len(ANSWER_TOKENS)}
    child, port = start_sim_profile(procs, binary, workdir, cpus, profile)
    return child, port, profile


def sim_stats(port: int) -> dict:
    """/admin/stats; the asking connection is among connections_accepted."""
    status, _, body = http_request(port, "GET", "/admin/stats")
    if status != 200:
        raise BenchError(f"llmgate-sim /admin/stats answered {status}")
    return json.loads(body)


# ---------------------------------------------------------------------------
# One upstream group: the upstream, nginx in front of it, llmgate in front of it.

@dataclass
class Group:
    name: str                      # "static" | "sim"
    description: str
    urls: dict[tuple[str, str], int] = field(default_factory=dict)   # (target, kind) -> port
    pids: dict[str, Callable[[], list[int]]] = field(default_factory=dict)  # "upstream"/"nginx"/"llmgate"
    counters: Optional[Callable[[], tuple[int, int]]] = None  # upstream (accepts, requests), minus our own ask
    in_flight: Optional[Callable[[], int]] = None  # requests the upstream is answering now
    llmgate_port: int = 0
    llmgate_config: dict = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


def verify_target(port: int, kind: str, what: str, api: str = "chat") -> None:
    """One request before measuring: 200, and a whole answer of the right shape
    (`api`: "chat", or "messages" for Anthropic's Messages API)."""
    if api == "messages":
        return verify_messages(port, kind, what)
    status, headers, body = http_request(port, "POST", PATH, request_body(kind == "stream"))
    if status != 200:
        raise BenchError(f"{what}: a {kind} request answered {status}: {body[:500]!r}")
    ctype = headers.get("content-type", "")
    text = body.decode(errors="replace")
    if kind == "stream":
        if not ctype.startswith("text/event-stream") or "data: [DONE]" not in text or '"content":"' not in text:
            raise BenchError(f"{what}: a stream request got {ctype!r}, not a whole event stream: {text[:500]!r}")
    else:
        try:
            obj = json.loads(body)
            content = obj["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise BenchError(f"{what}: a non-stream request got no chat.completion: {text[:500]!r}")
        if not content:
            raise BenchError(f"{what}: a non-stream request got an empty answer")


def verify_messages(port: int, kind: str, what: str) -> None:
    """verify_target for a Messages request (with a conversation: it is translated to chat)."""
    status, headers, body = http_request(port, "POST", MESSAGES_PATH, messages_request_body(kind == "stream", 4))
    if status != 200:
        raise BenchError(f"{what}: a {kind} Messages request answered {status}: {body[:500]!r}")
    text = body.decode(errors="replace")
    if kind == "stream":
        if "event: message_stop" not in text or '"text_delta"' not in text:
            raise BenchError(f"{what}: a stream Messages request got no whole event stream: {text[:500]!r}")
        return
    try:
        answer = json.loads(body)["content"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise BenchError(f"{what}: a Messages request got no message: {text[:500]!r}")
    if not answer:
        raise BenchError(f"{what}: a Messages request got an empty answer")


def setup_static(procs: Procs, args, workdir: Path) -> Group:
    g = Group("static", "nginx answering every request with a fixed chat.completion (JSON port) or a fixed "
                        f"22-event chat.completion.chunk stream (SSE port), from memory (`return 200 '...'`)")
    jp, sp, st = free_port(), free_port(), free_port()
    upstream = getattr(args, "upstream", "openai")  # profile.py --upstream anthropic|gemini
    ap = free_port() if upstream in NATIVE else 0
    conf = upstream_nginx_conf(workdir, jp, sp, st, ap, upstream if ap else "anthropic")
    up = start_nginx(procs, args.nginx, "upstream", conf, workdir, {args.server_cpu})
    wait_until("upstream nginx", lambda: stub_status(st)["requests"] > 0, procs)
    g.configs["upstream nginx"] = conf
    pj, ps = free_port(), free_port()
    conf = proxy_nginx_conf(workdir, [(pj, jp), (ps, sp)])
    px = start_nginx(procs, args.nginx, "proxy", conf, workdir, {args.server_cpu})
    g.configs["nginx proxy"] = conf
    # llmgate always asks its upstream for a stream (and assembles JSON for
    # non-stream clients itself): its provider is the SSE port for both kinds.
    cfg = (llmgate_config(ap, args.llmgate_workers, args.llmgate_pool, upstream) if ap
           else llmgate_config(sp, args.llmgate_workers, args.llmgate_pool))
    lg, lport = start_llmgate(procs, args.gateway, "llmgate", cfg, workdir, {args.server_cpu}, args.llmgate_log_level)
    g.llmgate_config, g.llmgate_port = cfg, lport
    g.urls = {("direct", "nonstream"): jp, ("direct", "stream"): sp,
              ("nginx", "nonstream"): pj, ("nginx", "stream"): ps,
              ("llmgate", "nonstream"): lport, ("llmgate", "stream"): lport}
    wait_until("nginx proxy", lambda: http_request(pj, "POST", PATH, request_body(False))[0] == 200, procs)
    g.pids = {"upstream": lambda: proc_tree(up.proc.pid), "nginx": lambda: proc_tree(px.proc.pid),
              "llmgate": lambda: [lg.proc.pid]}

    def counters() -> tuple[int, int]:
        s = stub_status(st)
        return s["accepts"] - 1, s["requests"] - 1  # without this ask
    g.counters = counters
    g.in_flight = lambda: (lambda s: s["reading"] + s["writing"] - 1)(stub_status(st))
    return g


def setup_sim(procs: Procs, args, workdir: Path) -> Group:
    sim, sport, profile = start_sim(procs, args.sim, workdir, {args.server_cpu}, args.sim_tps)
    g = Group("sim", f"llmgate-sim, one thread, profile `{_compact(profile)}` (streams are chunked, one HTTP "
                     f"chunk per event; non-stream answers are one JSON body)")
    pp = free_port()
    conf = proxy_nginx_conf(workdir, [(pp, sport)])
    px = start_nginx(procs, args.nginx, "proxy", conf, workdir, {args.server_cpu})
    g.configs["nginx proxy"] = conf
    cfg = llmgate_config(sport, args.llmgate_workers, args.llmgate_pool)
    lg, lport = start_llmgate(procs, args.gateway, "llmgate", cfg, workdir, {args.server_cpu}, args.llmgate_log_level)
    g.llmgate_config, g.llmgate_port = cfg, lport
    g.urls = {(t, k): p for k in KINDS for t, p in (("direct", sport), ("nginx", pp), ("llmgate", lport))}
    wait_until("nginx proxy", lambda: http_request(pp, "POST", PATH, request_body(False))[0] == 200, procs)
    g.pids = {"upstream": lambda: [sim.proc.pid], "nginx": lambda: proc_tree(px.proc.pid),
              "llmgate": lambda: [lg.proc.pid]}

    def counters() -> tuple[int, int]:
        s = sim_stats(sport)
        return int(s["connections_accepted"]) - 1, int(s["requests"])
    g.counters = counters
    g.in_flight = lambda: int(sim_stats(sport)["in_flight"])
    return g


# ---------------------------------------------------------------------------
# Load points.

@dataclass(frozen=True)
class Load:
    id: str                 # "closed64", "rate500"
    label: str              # "closed 64", "500/s"
    connections: Optional[int] = None
    rate: Optional[float] = None

    def flags(self) -> list[str]:
        if self.rate is not None:
            return ["--rate", f"{self.rate:g}"] + (["--connections", str(self.connections)] if self.connections else [])
        return ["--connections", str(self.connections)]


def make_loads(connections: int, rates: list[float], open_connections: Optional[int]) -> list[Load]:
    loads = [Load(f"closed{connections}", f"closed {connections}", connections=connections)]
    for r in rates:
        loads.append(Load(f"rate{r:g}", f"{r:g}/s", connections=open_connections, rate=r))
    return loads


@dataclass
class Point:
    group: str
    kind: str
    load: Load
    target: str

    @property
    def id(self) -> str:
        return f"{self.group}/{self.kind}/{self.target}/{self.load.id}"


def settle(g: Group, procs: Procs, timeout: float = 30.0) -> Optional[str]:
    """Wait until the upstream and llmgate answer nothing (what an overloaded
    point left queued), so that it does not spill into the next point."""
    deadline = time.monotonic() + timeout
    while True:
        procs.check_alive()
        up = g.in_flight() if g.in_flight else 0
        gw = int(metric_sum(llmgate_metrics(g.llmgate_port), "llmgate_requests_in_flight"))
        if up <= 0 and gw <= 0:
            return None
        if time.monotonic() > deadline:
            return f"still busy {timeout:.0f} s after the previous point (upstream {up}, llmgate {gw} in flight)"
        time.sleep(0.1)


def run_point(pt: Point, g: Group, procs: Procs, args, workdir: Path) -> dict:
    port = g.urls[(pt.target, pt.kind)]
    body_file = workdir / f"body-{pt.kind}.json"
    out_json = workdir / "points" / (pt.id.replace("/", "_") + ".json")
    out_json.parent.mkdir(exist_ok=True)
    out_json.unlink(missing_ok=True)
    argv = [str(args.loadgen), "--url", f"http://{HOST}:{port}{PATH}", "--body-file", str(body_file),
            *head_flags(getattr(args, "sdk_head", False)),
            *pt.load.flags(), "--duration", f"{args.duration:g}", "--warmup", f"{args.warmup:g}",
            "--cpu", str(args.loadgen_cpu), "--json", str(out_json)]
    server_pids = {role: fn() for role, fn in g.pids.items()}
    measured = ["upstream"] + ([pt.target] if pt.target != "direct" else [])
    unsettled = settle(g, procs)
    c0 = g.counters()
    m0 = llmgate_metrics(g.llmgate_port) if pt.target == "llmgate" else {}
    counting = getattr(args, "syscalls", False) and pt.target != "direct"
    counter = SyscallCounter(server_pids[pt.target]) if counting else None
    if counter:
        counter.start()
    cpu0 = {r: cpu_of(server_pids[r]) for r in measured}
    cores0 = core_times()
    t0 = time.monotonic()
    timeout = args.warmup + args.duration + 90
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           preexec_fn=harness.child_setup({args.loadgen_cpu}, NOFILE))
    except subprocess.TimeoutExpired:
        if counter:
            counter.stop()
        raise BenchError(f"{pt.id}: the load generator did not finish within {timeout:.0f} s")
    wall = time.monotonic() - t0
    cores1 = core_times()
    cpu1 = {r: cpu_of(g.pids[r]()) for r in measured}
    syscalls = counter.stop() if counter else None
    mem = {r: memory_of(g.pids[r]()) for r in measured}
    m1 = llmgate_metrics(g.llmgate_port) if pt.target == "llmgate" else {}
    c1 = g.counters()
    procs.check_alive()
    res: dict = {"id": pt.id, "group": pt.group, "kind": pt.kind, "target": pt.target, "load": pt.load.id,
                 "load_label": pt.load.label, "command": argv, "wall_s": wall, "exit_status": r.returncode,
                 "loadgen_stdout": r.stdout[-4000:], "loadgen_stderr": r.stderr[-4000:]}
    if unsettled:
        res["unsettled"] = unsettled
        log(f"    warning: {unsettled}")
    try:
        res["loadgen"] = json.loads(out_json.read_text())
    except (OSError, ValueError) as e:
        res["loadgen"] = None
        res["failure"] = f"no JSON from the load generator ({e}); exit status {r.returncode}: {r.stderr.strip()[-500:]}"
    up_requests = c1[1] - c0[1]
    res["upstream_requests"] = up_requests
    res["upstream_connections"] = c1[0] - c0[0]
    res["cpu"] = {}
    for role in measured:
        d = cpu_delta(cpu0[role], cpu1[role])
        d["us_per_request"] = 1e6 * d["s"] / up_requests if up_requests > 0 else None
        res["cpu"][role] = d
    res["memory"] = mem
    if syscalls:
        syscalls["per_request"] = {k: v / up_requests for k, v in syscalls.items()} if up_requests > 0 else None
        res["syscalls"] = syscalls
    res["core_busy"] = {"loadgen": core_busy(cores0, cores1, args.loadgen_cpu),
                        "server": core_busy(cores0, cores1, args.server_cpu)}
    # Shares of each core used by what we started, and by anything else
    # (other processes; also the kernel's softirq work, which no process is billed for).
    lg_cpu = (res["loadgen"] or {}).get("loadgen_cpu_s")
    res["loadgen_cpu_share"] = lg_cpu / wall if lg_cpu is not None and wall > 0 else None
    ours = sum(d["s"] for d in res["cpu"].values()) / wall if wall > 0 else None
    res["other_share"] = {
        "loadgen": (res["core_busy"]["loadgen"] - res["loadgen_cpu_share"]
                    if res["core_busy"]["loadgen"] is not None and res["loadgen_cpu_share"] is not None else None),
        "server": (res["core_busy"]["server"] - ours
                   if res["core_busy"]["server"] is not None and ours is not None else None)}
    if pt.target == "llmgate":
        res["llmgate_metrics"] = llmgate_delta(m0, m1)
    return res


def llmgate_delta(m0: dict, m1: dict) -> dict:
    d: dict = {"requests": {}, "attempts": {}, "overhead_us": {}}
    for o in metric_labels(m1, "llmgate_requests_total", "outcome"):
        n = metric_sum(m1, "llmgate_requests_total", outcome=o) - metric_sum(m0, "llmgate_requests_total", outcome=o)
        if n:
            d["requests"][o] = int(n)
    for o in metric_labels(m1, "llmgate_upstream_attempts_total", "outcome"):
        n = (metric_sum(m1, "llmgate_upstream_attempts_total", outcome=o)
             - metric_sum(m0, "llmgate_upstream_attempts_total", outcome=o))
        if n:
            d["attempts"][o] = int(n)
    for phase in ("admission", "first_token"):
        s = (metric_sum(m1, "llmgate_gateway_overhead_seconds_sum", phase=phase)
             - metric_sum(m0, "llmgate_gateway_overhead_seconds_sum", phase=phase))
        n = (metric_sum(m1, "llmgate_gateway_overhead_seconds_count", phase=phase)
             - metric_sum(m0, "llmgate_gateway_overhead_seconds_count", phase=phase))
        d["overhead_us"][phase] = {"mean": 1e6 * s / n if n else None, "count": int(n)}
    # Requests llmgate wrote upstream, by whether the pooled connection was reused.
    for conn in ("new", "reused"):
        d.setdefault("upstream_requests", {})[conn] = int(
            metric_sum(m1, "llmgate_upstream_requests_total", connection=conn)
            - metric_sum(m0, "llmgate_upstream_requests_total", connection=conn))
    return d


# ---------------------------------------------------------------------------
# Derived numbers.

def lat(res: Optional[dict], series: str, pct: str) -> Optional[float]:
    if not res or not res.get("loadgen"):
        return None
    s = (res["loadgen"].get("latency_us") or {}).get(series) or {}
    if not s.get("count"):
        return None
    v = s.get(pct)
    return float(v) if v is not None else None


def rate_of(res: Optional[dict]) -> Optional[float]:
    if not res or not res.get("loadgen"):
        return None
    v = res["loadgen"].get("rate")
    return float(v) if v is not None else None


def add_derived(results: list[dict]) -> None:
    by = {(r["group"], r["kind"], r["load"], r["target"]): r for r in results}
    for r in results:
        if r["target"] == "direct":
            continue
        base = by.get((r["group"], r["kind"], r["load"], "direct"))
        added: dict = {}
        for series in ("total", "ttft", "ttfb"):
            for pct in ("p50", "p90", "p99", "p999"):
                a, b = lat(r, series, pct), lat(base, series, pct)
                added[f"{series}_{pct}"] = None if a is None or b is None else a - b
        r["added_us"] = added


def fmt_us(v: Optional[float]) -> str:
    return "—" if v is None else f"{v:,.0f}"


def fmt_added(v: Optional[float]) -> str:
    return "—" if v is None else f"{v:+,.0f}"


def fmt_num(v: Optional[float], digits: int = 1) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def fmt_pct(v: Optional[float]) -> str:
    return "—" if v is None else f"{100 * v:.0f}%"


def reuse(r: dict) -> Optional[float]:
    """Share of upstream requests sent on a reused connection. For llmgate,
    from its own llmgate_upstream_requests_total{connection="new"|"reused"}
    (delta over the point: reused / total); for nginx and direct (and an
    llmgate without that metric), 1 − connections the upstream accepted /
    requests it served."""
    ur = (r.get("llmgate_metrics") or {}).get("upstream_requests") or {}
    total = ur.get("new", 0) + ur.get("reused", 0)
    if total > 0:
        return ur.get("reused", 0) / total
    n, c = r.get("upstream_requests") or 0, r.get("upstream_connections")
    if n <= 0 or c is None:
        return None
    return max(0.0, 1 - c / n)


def row_notes(r: dict, args) -> list[str]:
    notes = []
    lg = r.get("loadgen")
    if r.get("failure"):
        notes.append("FAILED")
    if r.get("unsettled"):
        notes.append("previous point not drained")
    if lg and not lg.get("requests"):
        notes.append("no request completed")
    if lg:
        tr = lg.get("target_rate")
        if tr and lg.get("rate") is not None and lg["rate"] < 0.95 * tr:
            notes.append("behind")
        if lg.get("errors"):
            notes.append("errors")
    share = r.get("loadgen_cpu_share")
    if share is not None and share > 0.9 and r["load"].startswith("closed"):
        notes.append("loadgen-bound")
    other = r.get("other_share") or {}
    for core in ("loadgen", "server"):
        if other.get(core) is not None and other[core] > OTHER_WORK:
            notes.append(f"{core} core {100 * other[core]:.0f}% other work")
    return notes


def kind_table(results: list[dict], group: str, kind: str, loads: list[Load], args) -> list[str]:
    stream = kind == "stream"
    head = ["target", "load", "req/s", "errors", "p50", "p90", "p99", "p99.9", "added p50", "added p99"]
    if stream:
        head += ["TTFT p50", "TTFT p99", "added TTFT p99"]
    head += ["proxy CPU µs/req", "upstream CPU µs/req", "proxy RSS MiB", "server core", "upstream reuse", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i < 2 or h == "notes" else "---:"
                                                           for i, h in enumerate(head)) + "|"]
    by = {(r["load"], r["target"]): r for r in results if r["group"] == group and r["kind"] == kind}
    for load in loads:
        for target in TARGETS:
            r = by.get((load.id, target))
            if r is None:
                continue
            lg = r.get("loadgen") or {}
            added = r.get("added_us") or {}
            proxy_cpu = r["cpu"].get(target, {}).get("us_per_request") if target != "direct" else None
            up_cpu = r["cpu"]["upstream"].get("us_per_request")
            rss = r["memory"][target]["rss_mib"] if target != "direct" else r["memory"]["upstream"]["rss_mib"]
            cells = [target, load.label, fmt_num(lg.get("rate")),
                     str(lg.get("errors", "—")) if lg else "—",
                     fmt_us(lat(r, "total", "p50")), fmt_us(lat(r, "total", "p90")),
                     fmt_us(lat(r, "total", "p99")), fmt_us(lat(r, "total", "p999")),
                     fmt_added(added.get("total_p50")) if target != "direct" else "",
                     fmt_added(added.get("total_p99")) if target != "direct" else ""]
            if stream:
                cells += [fmt_us(lat(r, "ttft", "p50")), fmt_us(lat(r, "ttft", "p99")),
                          fmt_added(added.get("ttft_p99")) if target != "direct" else ""]
            cells += [fmt_num(proxy_cpu) if target != "direct" else "", fmt_num(up_cpu),
                      (fmt_num(rss) + ("" if target != "direct" else " (upstream)")),
                      fmt_pct(r["core_busy"].get("server")), fmt_pct(reuse(r)),
                      ", ".join(row_notes(r, args))]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def find(results: list[dict], group: str, kind: str, load: str, target: str) -> Optional[dict]:
    for r in results:
        if (r["group"], r["kind"], r["load"], r["target"]) == (group, kind, load, target):
            return r
    return None


def target_checks(results: list[dict], closed: str, rate_load: str) -> list[tuple[str, str, str, str]]:
    """(check, value, target, PASS/MISS/SKIP) on the static upstream: issue 18's targets (and
    issue 6's p99 ratio, which it did not replace)."""
    out = []

    def ratio_check(kind: str, limit: float):
        name = f"{kind} closed-loop throughput, llmgate / nginx"
        a = rate_of(find(results, "static", kind, closed, "llmgate"))
        b = rate_of(find(results, "static", kind, closed, "nginx"))
        if a is None or not b:
            out.append((name, "—", f"≥ {limit}", "SKIP"))
            return
        v = a / b
        out.append((name, f"{v:.2f} ({a:,.0f} / {b:,.0f} req/s)", f"≥ {limit}", "PASS" if v >= limit else "MISS"))

    def cpu_check(kind: str, limit: float = 2.0):
        name = f"{kind} closed-loop CPU per request, llmgate / nginx"
        cpu = lambda t: (((find(results, "static", kind, closed, t) or {}).get("cpu") or {}).get(t) or {}).get(
            "us_per_request")
        a, b = cpu("llmgate"), cpu("nginx")
        if a is None or not b:
            out.append((name, "—", f"≤ {limit:g}", "SKIP"))
            return
        v = a / b
        out.append((name, f"{v:.2f} ({a:,.1f} / {b:,.1f} µs)", f"≤ {limit:g}", "PASS" if v <= limit else "MISS"))

    ratio_check("nonstream", 0.6)
    ratio_check("stream", 0.8)
    for kind in KINDS:
        cpu_check(kind)
    for kind in KINDS:
        lr = find(results, "static", kind, rate_load, "llmgate")
        nr = find(results, "static", kind, rate_load, "nginx")
        la = (lr or {}).get("added_us") or {}
        na = (nr or {}).get("added_us") or {}
        name = f"{kind} at {rate_load.replace('rate', '')}/s: llmgate added p50 − nginx added p50"
        a, b = la.get("total_p50"), na.get("total_p50")
        if a is None or b is None:
            out.append((name, "—", "≤ 60 µs", "SKIP"))
        else:
            out.append((name, f"{a - b:+,.0f} µs ({a:+,.0f} vs {b:+,.0f})", "≤ 60 µs", "PASS" if a - b <= 60 else "MISS"))
        name = f"{kind} at {rate_load.replace('rate', '')}/s: llmgate added p99 / nginx added p99"
        a, b = la.get("total_p99"), na.get("total_p99")
        if a is None or b is None:
            out.append((name, "—", "≤ 2", "SKIP"))
        elif b <= 0:
            out.append((name, f"n/a: nginx adds {b:+,.0f} µs (llmgate {a:+,.0f} µs)", "≤ 2",
                        "PASS" if a <= 0 else "SKIP"))
        else:
            v = a / b
            out.append((name, f"{v:.2f} ({a:+,.0f} / {b:+,.0f} µs)", "≤ 2", "PASS" if v <= 2 else "MISS"))
    lr = find(results, "static", "stream", rate_load, "llmgate")
    a = ((lr or {}).get("added_us") or {}).get("ttft_p99")
    name = f"stream at {rate_load.replace('rate', '')}/s: llmgate added TTFT p99"
    if a is None:
        out.append((name, "—", "≤ 100 µs", "SKIP"))
    else:
        out.append((name, f"{a:+,.0f} µs", "≤ 100 µs", "PASS" if a <= 100 else "MISS"))
    return out


def llmgate_table(results: list[dict]) -> list[str]:
    lines = ["| point | client requests | upstream attempts | admission overhead mean µs | first-token overhead "
             "mean µs | upstream connections opened / requests (llmgate) | same for nginx |",
             "|---|---|---|---:|---:|---|---|"]
    for r in results:
        if r["target"] != "llmgate":
            continue
        m = r.get("llmgate_metrics") or {}
        ov = m.get("overhead_us", {})
        ng = find(results, r["group"], r["kind"], r["load"], "nginx")
        ngx = f"{ng['upstream_connections']} / {ng['upstream_requests']}" if ng else "—"
        lines.append("| " + " | ".join([
            f"{r['group']} {r['kind']} {r['load_label']}",
            ", ".join(f"{k} {v}" for k, v in sorted(m.get("requests", {}).items())) or "—",
            ", ".join(f"{k} {v}" for k, v in sorted(m.get("attempts", {}).items())) or "—",
            fmt_num((ov.get("admission") or {}).get("mean")), fmt_num((ov.get("first_token") or {}).get("mean")),
            f"{r['upstream_connections']} / {r['upstream_requests']}", ngx]) + " |")
    return lines


# ---------------------------------------------------------------------------
# Machine.

def lscpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def git_info() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return f"{rev}{' (uncommitted changes)' if dirty else ''}" if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def mtime(path: Path) -> str:
    try:
        return dt.datetime.fromtimestamp(path.stat().st_mtime).astimezone().isoformat(timespec="minutes")
    except OSError:
        return "?"


def idle_check(cpus: list[int], seconds: float = 1.0) -> dict[int, Optional[float]]:
    a = core_times()
    time.sleep(seconds)
    b = core_times()
    return {c: core_busy(a, b, c) for c in cpus}


# ---------------------------------------------------------------------------
# Main.

def parse_args(argv: list[str]):
    ap = argparse.ArgumentParser(
        description="Proxy-overhead benchmark: upstream direct vs nginx vs llmgate (see bench/overhead/README.md).")
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 s per point, 0.5 s warmup")
    ap.add_argument("--duration", type=float, help="measured seconds per point (default 10; 2 with --quick)")
    ap.add_argument("--warmup", type=float, help="warmup seconds per point, discarded (default 1; 0.5 with --quick)")
    ap.add_argument("--only", help="comma-separated globs over point ids GROUP/KIND/TARGET/LOAD, e.g. "
                                   "'static/stream/*/*,*/*/*/closed64' (a proxy point brings its direct baseline)")
    ap.add_argument("--groups", default="static,sim", help="upstream groups to run: static, sim (default both)")
    ap.add_argument("--sim-loads", default="closed",
                    help="load points for the llmgate-sim upstream: 'closed' (default), 'all', or load ids")
    ap.add_argument("--connections", type=int, default=64, help="closed-loop connections (default 64)")
    ap.add_argument("--history-kib", type=int, default=0,
                    help="earlier conversation turns in every request body, about this many KiB "
                         "(default 0: one short prompt)")
    ap.add_argument("--sdk-head", action="store_true",
                    help="send the OpenAI SDK's request head (fifteen fields) instead of three")
    ap.add_argument("--rates", default="500,5000", help="open-loop rates, req/s (default 500,5000)")
    ap.add_argument("--open-connections", type=int,
                    help="open loop: most connections the load generator opens (default: its own, 1024)")
    ap.add_argument("--loadgen-cpu", type=int, default=0, help="CPU of the load generator (default 0)")
    ap.add_argument("--server-cpu", type=int, default=1, help="CPU of every server process (default 1)")
    ap.add_argument("--llmgate-workers", type=int, default=1, help="llmgate server.workers (default 1)")
    ap.add_argument("--llmgate-pool", type=int, default=1024,
                    help="llmgate providers[].pool.max_connections (default 1024: nginx has no cap either)")
    ap.add_argument("--llmgate-log-level", default="warn", choices=["debug", "info", "warn", "error"],
                    help="default warn: no per-request log line, as nginx runs with access_log off")
    ap.add_argument("--sim-tps", type=float, default=1e6, help="llmgate-sim output tokens/s (default 1e6)")
    ap.add_argument("--syscalls", action="store_true",
                    help="count each proxy's syscalls per request by kind (perf stat on the syscall tracepoints; "
                         "needs perf and root; the tracepoints cost a little CPU, so CPU figures of such a run are "
                         "not comparable with others)")
    ap.add_argument("--cooldown", type=float, default=0.5, help="pause between points, s (default 0.5)")
    ap.add_argument("--bin-dir", default=str(REPO / "build" / "bin"))
    ap.add_argument("--loadgen", help="default BIN_DIR/llmgate-loadgen")
    ap.add_argument("--gateway", help="default BIN_DIR/llmgate")
    ap.add_argument("--sim", help="default BIN_DIR/llmgate-sim")
    ap.add_argument("--nginx", help="nginx binary (default: the installed one; installed with apt-get if missing)")
    ap.add_argument("--no-install", action="store_true", help="never apt-get install nginx")
    ap.add_argument("--out", default=str(HERE / "results"), help="results directory (default bench/overhead/results)")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temporary directory (configs, logs, raw loadgen JSON)")
    ap.add_argument("--list", action="store_true", help="print the point ids this command would run, then exit")
    args = ap.parse_args(argv)
    if args.duration is None:
        args.duration = 2.0 if args.quick else 10.0
    if args.warmup is None:
        args.warmup = 0.5 if args.quick else 1.0
    return args


def plan(args, loads: list[Load]) -> list[Point]:
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    for g in groups:
        if g not in ("static", "sim"):
            raise BenchError(f"--groups: unknown group {g!r} (static, sim)")
    if args.sim_loads == "all":
        sim_loads = loads
    elif args.sim_loads == "closed":
        sim_loads = [l for l in loads if l.rate is None]
    else:
        ids = {x.strip() for x in args.sim_loads.split(",")}
        sim_loads = [l for l in loads if l.id in ids]
        if len(sim_loads) != len(ids):
            raise BenchError(f"--sim-loads: known load ids are {[l.id for l in loads]}")
    points = []
    for g in groups:
        for kind in KINDS:
            for load in (loads if g == "static" else sim_loads):
                for target in TARGETS:  # interleaved: the three targets of a point run back to back
                    points.append(Point(g, kind, load, target))
    if args.only:
        globs = [x.strip() for x in args.only.split(",") if x.strip()]
        chosen = {p.id for p in points if any(fnmatch.fnmatchcase(p.id, gl) for gl in globs)}
        for p in points:
            if p.id in chosen and p.target != "direct":
                chosen.add(Point(p.group, p.kind, p.load, "direct").id)
        points = [p for p in points if p.id in chosen]
        if not points:
            raise BenchError(f"--only {args.only!r} matches no point; ids look like static/stream/llmgate/rate500")
    return points


def run(args, command: str) -> int:
    ncpu = os.cpu_count() or 1
    for c in (args.loadgen_cpu, args.server_cpu):
        if c >= ncpu:
            raise BenchError(f"CPU {c} does not exist ({ncpu} CPUs)")
    if args.loadgen_cpu == args.server_cpu:
        log("warning: the load generator and the servers share a CPU")
    rates = [float(x) for x in args.rates.split(",") if x.strip()]
    loads = make_loads(args.connections, rates, args.open_connections)
    points = plan(args, loads)
    if args.list:
        print("\n".join(p.id for p in points))
        per = args.warmup + args.duration + args.cooldown + 0.5
        log(f"{len(points)} points, about {len(points) * per / 60:.1f} min")
        return EXIT_OK
    bin_dir = Path(args.bin_dir)
    args.loadgen = Path(args.loadgen or bin_dir / "llmgate-loadgen").resolve()
    args.gateway = Path(args.gateway or bin_dir / "llmgate").resolve()
    args.sim = Path(args.sim or bin_dir / "llmgate-sim").resolve()
    for b in (args.loadgen, args.gateway, args.sim):
        if not os.access(b, os.X_OK):
            raise BenchError(f"{b}: not an executable (build it, or pass --bin-dir / --loadgen / --gateway / --sim)")
    args.nginx = find_nginx(args.nginx, not args.no_install)

    # This script itself stays off the server core.
    try:
        os.sched_setaffinity(0, {args.loadgen_cpu})
    except OSError:
        pass

    now = dt.datetime.now().astimezone()
    stamp = now.strftime("%Y-%m-%d_%H%M%S")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, json_path = out_dir / f"{stamp}.md", out_dir / f"{stamp}.json"
    workdir = Path(tempfile.mkdtemp(prefix="llmgate-overhead-"))
    os.chmod(workdir, 0o755)  # nginx workers run as nobody
    for kind in KINDS:
        (workdir / f"body-{kind}.json").write_bytes(request_body(kind == "stream", args.history_kib))

    log(f"checking that CPUs {args.loadgen_cpu} and {args.server_cpu} are idle ...")
    idle = idle_check([args.loadgen_cpu, args.server_cpu])
    busy_warn = [f"CPU {c} was {100 * b:.0f}% busy before the run" for c, b in idle.items() if b and b > 0.10]
    for w in busy_warn:
        log(f"warning: {w}: other work on the machine will disturb the numbers")

    meta = {
        "date": now.isoformat(timespec="seconds"), "command": command,
        "machine": {"cpu": lscpu_model(), "cpus": ncpu, "kernel": platform.release(), "host": platform.node(),
                    "python": platform.python_version(), "nginx": nginx_version(args.nginx),
                    "git": git_info(), "loadavg_at_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                    "busy_before_run": {str(c): b for c, b in idle.items()}},
        "binaries": {"llmgate": f"{args.gateway} (built {mtime(args.gateway)})",
                     "llmgate-loadgen": f"{args.loadgen} (built {mtime(args.loadgen)})",
                     "llmgate-sim": f"{args.sim} (built {mtime(args.sim)})", "nginx": args.nginx,
                     "llmgate GLIBC_TUNABLES": image_glibc_tunables()},
        "settings": {"duration_s": args.duration, "warmup_s": args.warmup, "loadgen_cpu": args.loadgen_cpu,
                     "server_cpu": args.server_cpu, "llmgate_workers": args.llmgate_workers,
                     "llmgate_pool": args.llmgate_pool, "llmgate_log_level": args.llmgate_log_level,
                     "history_kib": args.history_kib, "sdk_head": args.sdk_head,
                     "loads": [l.__dict__ for l in loads]},
        "groups": {}, "warnings": busy_warn,
    }
    results: list[dict] = []
    try:
        for gname in dict.fromkeys(p.group for p in points):
            gpoints = [p for p in points if p.group == gname]
            gdir = workdir / gname
            gdir.mkdir()
            for kind in KINDS:
                shutil.copy(workdir / f"body-{kind}.json", gdir / f"body-{kind}.json")
            procs = Procs(gdir)
            try:
                log(f"[{gname}] starting the upstream, nginx and llmgate on CPU {args.server_cpu} ...")
                g = setup_static(procs, args, gdir) if gname == "static" else setup_sim(procs, args, gdir)
                for (target, kind), port in g.urls.items():
                    if any(p.kind == kind and p.target == target for p in gpoints):
                        verify_target(port, kind, f"{gname} {target}")
                meta["groups"][gname] = {"description": g.description, "llmgate_config": g.llmgate_config,
                                         "configs": g.configs}
                for i, pt in enumerate(gpoints):
                    log(f"[{i + 1}/{len(gpoints)}] {pt.id} ...")
                    res = run_point(pt, g, procs, args, gdir)
                    results.append(res)
                    lg = res.get("loadgen") or {}
                    log(f"    {fmt_num(lg.get('rate'))} req/s, {lg.get('errors', '?')} errors, p50 "
                        f"{fmt_us(lat(res, 'total', 'p50'))} µs, p99 {fmt_us(lat(res, 'total', 'p99'))} µs"
                        + (f"; {res['failure']}" if res.get("failure") else ""))
                    time.sleep(args.cooldown)
                meta["groups"][gname]["rss_at_end_mib"] = {r: memory_of(fn())["rss_mib"] for r, fn in g.pids.items()}
            finally:
                procs.stop_all()
    finally:
        add_derived(results)
        md = report(meta, results, loads, args)
        md_path.write_text(md)
        json_path.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
        if args.keep_tmp:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        if len(results) < len(points):
            log(f"incomplete report ({len(results)} of {len(points)} points): {md_path}")
    print(md, flush=True)
    log(f"report: {md_path}\nraw:    {json_path}")
    return EXIT_OK


def report(meta: dict, results: list[dict], loads: list[Load], args) -> str:
    m = meta["machine"]
    s = meta["settings"]
    closed = loads[0].id
    rate_load = next((l.id for l in loads if l.rate == 500), next((l.id for l in loads if l.rate), closed))
    lines = ["# llmgate proxy overhead", "",
             f"- date: {meta['date']}",
             f"- machine: {m['cpu']}, {m['cpus']} CPUs, Linux {m['kernel']}, {m['host']}; "
             f"load average at start {m['loadavg_at_start']}",
             f"- nginx {m['nginx']}; repository at {m['git']}; Python {m['python']}",
             f"- llmgate runs with GLIBC_TUNABLES={meta.get('binaries', {}).get('llmgate GLIBC_TUNABLES') or '(unset)'} "
             f"(the container image's; see bench/README.md)",
             f"- command: `{meta['command']}`",
             f"- pinning: load generator on CPU {s['loadgen_cpu']}; upstream, nginx (master and worker) and "
             f"llmgate on CPU {s['server_cpu']}",
             f"- each point: {s['warmup_s']:g} s warmup (discarded), then {s['duration_s']:g} s measured; the three "
             f"targets of a load point run back to back",
             f"- llmgate: `server.workers: {s['llmgate_workers']}`, `--log-level {s['llmgate_log_level']}` (no "
             f"per-request log line; nginx runs with `access_log off`), `--watch-interval 0` (no config-file "
             f"polling), `pool.max_connections: {s['llmgate_pool']}` (nginx does not cap upstream connections); "
             f"routing, metrics and the router's statistics stay on (they are not optional)",
             f"- nginx: `worker_processes 1`, `access_log off`, `proxy_http_version 1.1`, "
             f"`proxy_set_header Connection \"\"`, `proxy_buffering off`, upstream `keepalive 64`, "
             f"`keepalive_requests 1000000` (client and upstream sides)",
             f"- request body: {len(request_body(False, s.get('history_kib', 0))):,} bytes (non-stream)"
             + (f", a conversation with about {s['history_kib']} KiB of earlier turns" if s.get("history_kib") else
                ", one short prompt"),
             "- request head: " + (f"the OpenAI SDK's ({len(SDK_HEADERS) + 3} fields)" if s.get("sdk_head") else
                                   "Host, Content-Type, Content-Length"),
             ""]
    for w in meta.get("warnings", []):
        lines.append(f"**warning**: {w}")
    if meta.get("warnings"):
        lines.append("")
    lines += ["Latencies in µs, from the load generator (open loop: from the intended send time). *added* = "
              "proxy − direct at the same percentile, same upstream, kind and load. CPU µs/req = the process's "
              "CPU time (all threads; nginx: master + worker) over the point / upstream requests in it (warmup "
              "included in both). *server core* = busy share of the server CPU. *upstream reuse* = 1 − "
              "connections the upstream accepted / requests it served. Notes: *behind* = open loop reached < 95% "
              "of the target rate; *loadgen-bound* = the load generator used > 90% of its CPU (closed-loop "
              "throughput is then its limit, not the server's); *… core N% other work* = that core was busy "
              f"with work not billed to the processes of this run (other processes, or kernel softirq time) for "
              f"more than {100 * OTHER_WORK:.0f}% of the point.", ""]
    for gname, g in meta["groups"].items():
        lines += [f"## Upstream: {gname}", "", g["description"], ""]
        for kind in KINDS:
            if not any(r["group"] == gname and r["kind"] == kind for r in results):
                continue
            lines += [f"### {gname}, {'streamed' if kind == 'stream' else 'non-streamed'} requests", ""]
            lines += kind_table(results, gname, kind, loads, args)
            lines.append("")
    if any(r["group"] == "static" for r in results):
        lines += ["## Targets (static upstream)", "", "| check | value | target | result |", "|---|---|---|---|"]
        for name, value, target, status in target_checks(results, closed, rate_load):
            lines.append(f"| {name} | {value} | {target} | **{status}** |")
        lines.append("")
    counted = [r for r in results if (r.get("syscalls") or {}).get("per_request")]
    if counted:
        lines += ["## Syscalls per request", "",
                  "The proxy's syscalls over the point (warmup included) per upstream request, from the kernel's "
                  f"syscall tracepoints (`perf stat`, `--syscalls`). {SYSCALL_LEGEND}.", ""]
        lines += syscall_table("point", [(r["id"], r["syscalls"]["per_request"]) for r in counted])
        lines.append("")
    if any(r["target"] == "llmgate" for r in results):
        lines += ["## llmgate detail", "",
                  "From llmgate's /metrics (deltas over each point): client requests and upstream attempts by "
                  "outcome, and `llmgate_gateway_overhead_seconds` means. llmgate's upstream connection reuse comes "
                  "from its `llmgate_upstream_requests_total{connection}`; nginx's is counted on the upstream's "
                  "side (nginx stub_status, llmgate-sim /admin/stats).", ""]
        lines += llmgate_table(results)
        lines.append("")
    failed = [r for r in results if r.get("failure") or (r.get("loadgen") or {}).get("errors")]
    if failed:
        lines += ["## Errors", ""]
        for r in failed:
            lg = r.get("loadgen") or {}
            lines.append(f"- {r['id']}: " + (r.get("failure") or f"{lg.get('errors')} errors "
                                               f"{json.dumps(lg.get('error_kinds') or {})}"))
        lines.append("")
    lines += ["## Configurations", ""]
    for gname, g in meta["groups"].items():
        lines += [f"llmgate config ({gname} upstream):", "", "```yaml",
                  yaml.safe_dump(g["llmgate_config"], sort_keys=False).rstrip(), "```", ""]
        for cname, text in g["configs"].items():
            lines += [f"<details><summary>{cname} config ({gname} upstream)</summary>", "", "```nginx",
                      text.rstrip(), "```", "", "</details>", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = " ".join(shlex.quote(a) for a in ["python3", os.path.relpath(sys.argv[0])] + argv)
    # Ctrl-C works even when started with SIGINT ignored (a background job of a script).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    try:
        return run(args, command)
    except KeyboardInterrupt:
        log("interrupted: stopped every process this run started")
        return EXIT_INTERRUPTED
    except BenchError as e:
        log(f"error: {e}")
        return e.code
    finally:
        _kill_leftovers()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
