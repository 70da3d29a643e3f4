#!/usr/bin/env python3
"""Routing-quality benchmark for llmgate.

For every scenario (bench/routing/scenarios/*.yaml) and every policy it names,
start fresh llmgate-sim processes (one per provider) and a fresh gateway, drive
open-loop Poisson traffic through the gateway, change the providers' profiles
on a script, and measure what the clients saw. See README.md next to this file.

Python 3.9+ standard library plus PyYAML. No third-party HTTP client: a small
HTTP/1.1 client over asyncio streams is below.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import copy
import datetime as dt
import json
import math
import os
import platform
import random
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import harness  # noqa: E402  (tools/harness.py: log, errors, child setup)

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("run.py needs PyYAML (pip install pyyaml)")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
HOST = "127.0.0.1"

# Exit codes.
EXIT_OK = 0
EXIT_GATEWAY_REFUSED = 2  # the gateway did not start (config rejected, crash at start)
EXIT_SETUP = 3            # bad scenario file, missing binary, a sim that did not start
EXIT_GATEWAY_DIED = 4     # the gateway exited during a run
EXIT_INTERRUPTED = 130


# log, the setup error and the child setup are shared by the harnesses (tools/harness.py).
BenchError = harness.HarnessError
log = harness.log


# ---------------------------------------------------------------------------
# Child processes: always cleaned up, also on Ctrl-C, SIGTERM or a crash of
# this script (children get SIGTERM from the kernel when we die: PDEATHSIG).

class ProcGroup(harness.Processes):
    """The processes of one run. stop() ends exactly those, by pid."""

    def __init__(self, workdir: Path):
        super().__init__(workdir, BenchError)

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:  # type: ignore[override]
        return super().start(name, argv).proc

    def log_of(self, name: str, limit: int = 8000) -> str:
        return self.log_tail(name, limit)

    def stop(self, timeout: float = 5.0) -> None:  # type: ignore[override]
        self.stop_all(timeout)


_kill_leftovers = harness.stop_leftovers


async def wait_port_file(path: Path, proc: subprocess.Popen, what: str, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with status {proc.returncode} before listening")
        try:
            text = path.read_text().strip()
            if text:
                return int(text)
        except (OSError, ValueError):
            pass
        await asyncio.sleep(0.02)
    raise BenchError(f"{what} did not write its port file {path} within {timeout:.0f} s")


# ---------------------------------------------------------------------------
# A small HTTP/1.1 client over asyncio streams.

class HttpError(Exception):
    pass


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        raise HttpError("connection closed before the response head"
                        if not e.partial else "connection closed inside the response head")
    except asyncio.LimitOverrunError:
        raise HttpError("response head too large")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise HttpError(f"bad status line {lines[0][:80]!r}")
    try:
        status = int(parts[1])
    except ValueError:
        raise HttpError(f"bad status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return status, headers


async def body_pieces(reader: asyncio.StreamReader, headers: dict[str, str], trailers: dict[str, str]):
    """Yields the response body as it arrives, de-chunked; fills `trailers`."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await reader.readuntil(b"\r\n")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise HttpError(f"bad chunk size line {line[:40]!r}")
            if size == 0:
                while True:
                    t = await reader.readuntil(b"\r\n")
                    if t == b"\r\n":
                        return
                    n, _, v = t.decode("latin-1").partition(":")
                    trailers[n.strip().lower()] = v.strip()
            data = await reader.readexactly(size)
            if await reader.readexactly(2) != b"\r\n":
                raise HttpError("chunk not followed by CRLF")
            yield data
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            data = await reader.read(min(left, 1 << 16))
            if not data:
                raise HttpError(f"connection closed with {left} body bytes missing")
            left -= len(data)
            yield data
    else:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                return
            yield data


def request_bytes(method: str, port: int, target: str, body: Optional[bytes],
                  extra_headers: Optional[dict[str, str]] = None) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {HOST}:{port}", "Connection: close",
             "User-Agent: llmgate-bench"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    for k, v in (extra_headers or {}).items():
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


async def close_writer(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), 1.0)
    except Exception:
        pass


async def http_call(port: int, method: str, target: str, payload: Any = None,
                    timeout: float = 10.0) -> tuple[int, Any]:
    """One small request (admin APIs). Returns (status, parsed JSON or text)."""

    async def go():
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            body = None if payload is None else json.dumps(payload).encode()
            writer.write(request_bytes(method, port, target, body))
            await writer.drain()
            status, headers = await read_head(reader)
            trailers: dict[str, str] = {}
            data = b"".join([p async for p in body_pieces(reader, headers, trailers)])
        finally:
            await close_writer(writer)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, data.decode(errors="replace")

    return await asyncio.wait_for(go(), timeout)


# ---------------------------------------------------------------------------
# Scenarios and policies.

SCENARIO_KEYS = {"description", "duration_s", "seed", "model", "traffic", "gateway", "model_routing",
                 "providers", "changes", "policies", "oracle", "targets", "client_timeout_s"}
# connections: instead of Poisson arrivals from this script, llmgate-loadgen
# keeps that many streams open for the whole run (closed loop, opened over
# ramp_s): many concurrent long streams, more than Python keeps up with.
TRAFFIC_KEYS = {"rate", "stream_share", "max_tokens", "prompt", "connections", "ramp_s", "conversations",
                "long_prompts"}
# long_prompts: {share, chars}: that share of the requests (drawn per arrival)
# carry a user message of `chars` characters instead of `prompt` (a long
# document: prefill decides its first token; the oracle knows each provider's
# prefill_ms_per_1k_tokens).
# conversations: each arrival is the next turn of one of `concurrent`
# conversations (one idle at the time; none idle: the arrival is dropped),
# each a shared system prompt of `system_chars`, then `turns` turns of a user
# message of `turn_chars` and a short assistant answer; then it starts over.
CONVERSATION_KEYS = {"concurrent", "turns", "system_chars", "turn_chars"}
PROVIDER_KEYS = {"name", "model", "region", "price", "profile", "deployment"}
CHANGE_KEYS = {"at_s", "provider", "profile", "restore", "label", "expect", "threshold"}
ORACLE_RULES = {"min_ttft", "cheapest_within_ttft", "min_e2e"}
# Targets that compare one summary percentile with the oracle's:
# type -> (summary metric, percentile, default policy, default max_ratio).
RATIO_TARGETS = {
    "ttft_p50_vs_oracle": ("ttft_ms", "p50", "latency", 1.10),
    "ttft_p95_vs_oracle": ("ttft_ms", "p95", "latency", 1.5),
    "e2e_p50_vs_oracle": ("e2e_ms", "p50", "e2e", 1.10),
    "e2e_mean_vs_oracle": ("e2e_ms", "mean", "e2e", 1.2),
    "ttft_mean_vs_oracle": ("ttft_ms", "mean", "latency", 1.2),
    # Conversation mode: against the affinity oracle.
    "followup_mean_vs_oracle": ("followup_ttft_ms", "mean", "latency", 1.2),
    # Long-prompt mode: the long prompts' TTFT against the oracle's.
    "long_mean_vs_oracle": ("long_ttft_ms", "mean", "latency", 1.05),
}
RATIO_LABELS = {"ttft_ms": "TTFT", "e2e_ms": "end-to-end", "followup_ttft_ms": "follow-up TTFT",
                "long_ttft_ms": "long-prompt TTFT"}
TARGET_TYPES = set(RATIO_TARGETS) | {"reaction", "zero_errors", "hedge_p99", "cost_vs_oracle", "vs_static",
                                     "cache_hit_share", "estimate_vs_median", "extra_upstream"}
GATEWAY_POLICIES = {"latency", "throughput", "e2e", "cost", "balanced", "ordered", "round_robin", "random"}


@dataclass
class Provider:
    name: str
    model: str
    region: str
    price: dict
    profile: dict
    deployment: dict  # extra deployment keys (expected_ttft, ...)


@dataclass
class Change:
    at_s: float
    provider: str
    profile: Optional[dict]
    restore: bool
    label: str
    expect: Optional[str]  # "leave" | "return" | None
    threshold: float


@dataclass
class Policy:
    name: str        # as reported ("latency+hedge")
    base: str        # gateway policy, or "oracle"
    routing: dict    # merged into models[0].routing
    route: dict      # added to every request body as "route"
    gateway: dict = field(default_factory=dict)  # merged over the gateway config

    @property
    def oracle(self) -> bool:
        return self.base == "oracle"


@dataclass
class Scenario:
    name: str
    path: Path
    description: str
    duration_s: float
    seed: int
    model: str
    rate: float
    stream_share: float
    max_tokens: Optional[int]
    prompt: str
    gateway: dict
    model_routing: dict
    providers: list[Provider]
    changes: list[Change]
    policies: list[Policy]
    oracle: dict
    targets: list[dict]
    client_timeout_s: float
    connections: Optional[int] = None  # loadgen mode (TRAFFIC_KEYS)
    ramp_s: float = 0.0
    conversation: Optional[dict] = None  # conversation mode (CONVERSATION_KEYS)
    long_prompts: Optional[dict] = None  # {share, chars}

    def provider(self, name: str) -> Provider:
        for p in self.providers:
            if p.name == name:
                return p
        raise KeyError(name)


def _check_keys(where: str, d: Any, allowed: set[str]) -> dict:
    if not isinstance(d, dict):
        raise BenchError(f"{where}: expected a mapping")
    unknown = set(d) - allowed
    if unknown:
        raise BenchError(f"{where}: unknown key(s) {sorted(unknown)} (allowed: {sorted(allowed)})")
    return d


def parse_policy(spec: Any, where: str) -> Policy:
    """'latency', 'latency+hedge', 'oracle', or {name, policy, routing, route}."""
    if isinstance(spec, str):
        parts = spec.split("+")
        base, mods = parts[0], parts[1:]
        routing: dict = {}
        hedge = False
        for m in mods:
            if m == "hedge":
                hedge = True
            elif m == "nohedge":
                hedge = False
            else:
                raise BenchError(f"{where}: unknown policy modifier '+{m}' in {spec!r} (known: +hedge, +nohedge)")
        pol = Policy(spec, base, routing, {})
        if base != "oracle":
            routing["policy"] = base
            routing["hedging"] = {"enabled": hedge}
        elif mods:
            raise BenchError(f"{where}: the oracle takes no modifiers")
        else:
            routing["policy"] = "ordered"
    elif isinstance(spec, dict):
        _check_keys(where, spec, {"name", "policy", "routing", "route", "gateway"})
        if "name" not in spec or "policy" not in spec:
            raise BenchError(f"{where}: a policy mapping needs 'name' and 'policy'")
        routing = copy.deepcopy(spec.get("routing") or {})
        base = spec["policy"]
        routing.setdefault("policy", "ordered" if base == "oracle" else base)
        pol = Policy(str(spec["name"]), base, routing, copy.deepcopy(spec.get("route") or {}),
                     copy.deepcopy(spec.get("gateway") or {}))
    else:
        raise BenchError(f"{where}: a policy is a string or a mapping")
    if pol.base != "oracle" and pol.base not in GATEWAY_POLICIES:
        raise BenchError(f"{where}: unknown policy {pol.base!r} (known: {sorted(GATEWAY_POLICIES)} and oracle)")
    return pol


def load_scenario(path: Path) -> Scenario:
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise BenchError(f"{path}: {e}")
    where = path.name
    _check_keys(where, raw, SCENARIO_KEYS)
    traffic = _check_keys(f"{where}: traffic", raw.get("traffic") or {}, TRAFFIC_KEYS)
    providers = []
    for i, p in enumerate(raw.get("providers") or []):
        w = f"{where}: providers[{i}]"
        _check_keys(w, p, PROVIDER_KEYS)
        if "name" not in p:
            raise BenchError(f"{w}: missing 'name'")
        profile = copy.deepcopy(p.get("profile") or {})
        if p.get("region"):
            profile.setdefault("region", p["region"])
        providers.append(Provider(str(p["name"]), str(p.get("model") or f"{p['name']}-model"),
                                  str(p.get("region") or ""), dict(p.get("price") or {}), profile,
                                  dict(p.get("deployment") or {})))
    if not providers:
        raise BenchError(f"{where}: no providers")
    names = [p.name for p in providers]
    if len(set(names)) != len(names):
        raise BenchError(f"{where}: provider names must be unique")
    changes = []
    for i, c in enumerate(raw.get("changes") or []):
        w = f"{where}: changes[{i}]"
        _check_keys(w, c, CHANGE_KEYS)
        if c.get("provider") not in names:
            raise BenchError(f"{w}: provider must be one of {names}")
        if ("profile" in c) == bool(c.get("restore")):
            raise BenchError(f"{w}: give either 'profile' (a patch) or 'restore: true'")
        if c.get("expect") not in (None, "leave", "return"):
            raise BenchError(f"{w}: expect must be 'leave' or 'return'")
        changes.append(Change(float(c["at_s"]), c["provider"], c.get("profile"), bool(c.get("restore")),
                              str(c.get("label") or f"{c['provider']} changes"), c.get("expect"),
                              float(c.get("threshold", 0.2))))
    changes.sort(key=lambda c: c.at_s)
    policies = [parse_policy(s, f"{where}: policies[{i}]") for i, s in enumerate(raw.get("policies") or [])]
    oracle = dict(raw.get("oracle") or {"rule": "min_ttft"})
    if oracle.get("rule") not in ORACLE_RULES:
        raise BenchError(f"{where}: oracle.rule must be one of {sorted(ORACLE_RULES)}")
    targets = list(raw.get("targets") or [])
    for i, t in enumerate(targets):
        if not isinstance(t, dict) or t.get("type") not in TARGET_TYPES:
            raise BenchError(f"{where}: targets[{i}].type must be one of {sorted(TARGET_TYPES)}")
    max_tokens = traffic.get("max_tokens", 64)
    conversation = None
    if traffic.get("conversations") is not None:
        conversation = _check_keys(f"{where}: traffic.conversations", traffic["conversations"],
                                   CONVERSATION_KEYS)
        conversation = {"concurrent": int(conversation.get("concurrent", 20)),
                        "turns": int(conversation.get("turns", 5)),
                        "system_chars": int(conversation.get("system_chars", 16000)),
                        "turn_chars": int(conversation.get("turn_chars", 2000))}
    return Scenario(
        name=path.stem, path=path, description=str(raw.get("description") or "").strip(),
        duration_s=float(raw.get("duration_s", 30)), seed=int(raw.get("seed", 1)),
        model=str(raw.get("model") or "chat"), rate=float(traffic.get("rate", 20)),
        stream_share=float(traffic.get("stream_share", 1.0)),
        max_tokens=None if max_tokens is None else int(max_tokens),
        prompt=str(traffic.get("prompt") or "Write a short paragraph about routing requests to the fastest provider."),
        gateway=dict(raw.get("gateway") or {}), model_routing=dict(raw.get("model_routing") or {}),
        providers=providers, changes=changes, policies=policies, oracle=oracle, targets=targets,
        client_timeout_s=float(raw.get("client_timeout_s", 30)),
        connections=int(traffic["connections"]) if traffic.get("connections") else None,
        ramp_s=float(traffic.get("ramp_s", 0)), conversation=conversation,
        long_prompts=({"share": float(traffic["long_prompts"].get("share", 0.05)),
                       "chars": int(traffic["long_prompts"].get("chars", 200000))}
                      if traffic.get("long_prompts") else None))


def deep_merge(dst: dict, src: dict) -> dict:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            deep_merge(dst[k], v)
        else:
            dst[k] = copy.deepcopy(v)
    return dst


def gateway_config(scn: Scenario, pol: Policy, ports: dict[str, int], plain: bool) -> dict:
    cfg: dict = {"server": {"listeners": [{"address": HOST, "port": 0}], "workers": 1}}
    deep_merge(cfg, scn.gateway)
    deep_merge(cfg, pol.gateway)
    providers = []
    for p in scn.providers:
        entry = {"name": p.name, "base_url": f"http://{HOST}:{ports[p.name]}/v1"}
        if p.region:
            entry["region"] = p.region
        providers.append(entry)
    deployments = []
    for p in scn.providers:
        d = {"provider": p.name, "model": p.model}
        if p.price:
            d["price"] = p.price
        if not plain:
            d.update(p.deployment)
        deployments.append(d)
    model: dict = {"name": scn.model, "deployments": deployments}
    routing = deep_merge(copy.deepcopy(scn.model_routing), pol.routing)
    if not plain and routing:
        model["routing"] = routing
    cfg["providers"] = providers
    cfg["models"] = [model]
    if plain:
        cfg.pop("routing", None)
    return cfg


# ---------------------------------------------------------------------------
# The oracle: hindsight-best deployment from the scripted (true) profiles.

_Z = {50: 0.0, 90: 1.2815515655446004, 95: 1.6448536269514722, 99: 2.3263478740408408}


def dist_mean(d: Any) -> float:
    return float(d) if isinstance(d, (int, float)) else float(d.get("mean", 0))


def dist_quantile(d: Any, pct: int) -> float:
    if isinstance(d, (int, float)):
        return float(d)
    mean, sd, kind = float(d.get("mean", 0)), float(d.get("stddev", 0)), d.get("dist", "fixed")
    z = _Z.get(pct) or statistics.NormalDist().inv_cdf(pct / 100)
    if kind == "normal":
        return max(0.0, mean + z * sd)
    if kind == "lognormal" and mean > 0 and sd > 0:
        s2 = math.log1p((sd / mean) ** 2)
        return math.exp(math.log(mean) - s2 / 2 + z * math.sqrt(s2))
    return mean


def has_fault(profile: dict) -> bool:
    """An error rate, a rate limit or a fault that applies to some requests."""
    if float(profile.get("error_rate", 0)) > 0:
        return True
    if float(profile.get("fault_rate", 1)) <= 0:
        return False
    return any(int(profile.get(k, -1)) >= 0 for k in
               ("stall_before_first_token_ms", "stall_after_tokens", "cut_after_tokens", "malformed_after_tokens"))


def oracle_pick(scn: Scenario, profiles: dict[str, dict], prompt_tokens: float = 0) -> str:
    rule = scn.oracle.get("rule", "min_ttft")
    clean = [p for p in scn.providers if not has_fault(profiles[p.name])]
    # A prompt over a provider's context window gets its 400: not a choice.
    fits = [p for p in clean if not int(profiles[p.name].get("context_window", 0)) or
            prompt_tokens + (scn.max_tokens or 0) <= int(profiles[p.name]["context_window"])]
    clean = fits or clean
    if not clean:  # everyone is faulty: least errors, then fastest
        clean = sorted(scn.providers, key=lambda p: float(profiles[p.name].get("error_rate", 0)))[:1]

    def ttft(p: Provider) -> float:
        # For this request: its prompt's prefill on top (the sims' own rate).
        prefill = float(profiles[p.name].get("prefill_ms_per_1k_tokens", 0)) * prompt_tokens / 1000
        return dist_mean(profiles[p.name].get("ttft_ms", 200)) + prefill

    if rule == "min_e2e":
        # Time to the whole answer: first token, then the tokens at the speed.
        tokens = float(scn.oracle.get("tokens", scn.max_tokens or 64))

        def e2e(p: Provider) -> float:
            return ttft(p) + 1000 * tokens / max(0.1, dist_mean(profiles[p.name].get("tps", 50)))
        return min(clean, key=e2e).name
    if rule == "cheapest_within_ttft":
        limit = float(scn.oracle.get("max_ttft_ms", 1e18))
        pct = int(scn.oracle.get("percentile", 95))
        ok = [p for p in clean if dist_quantile(profiles[p.name].get("ttft_ms", 200), pct) <= limit]
        if ok:
            return min(ok, key=lambda p: (float(p.price.get("output_per_1m", 0)),
                                          float(p.price.get("input_per_1m", 0)), ttft(p))).name
    return min(clean, key=ttft).name


# ---------------------------------------------------------------------------
# Traffic.

@dataclass
class Arrival:
    index: int
    at: float  # seconds after the run started
    stream: bool
    long: bool = False  # carries a long prompt (traffic.long_prompts)


def arrivals(scn: Scenario, duration: float) -> list[Arrival]:
    rng = random.Random(scn.seed)
    out: list[Arrival] = []
    t = 0.0
    while True:
        t += rng.expovariate(scn.rate)
        if t >= duration:
            return out
        out.append(Arrival(len(out), t, rng.random() < scn.stream_share))
        if scn.long_prompts:
            out[-1].long = rng.random() < scn.long_prompts["share"]


def parse_sse_events(buf: bytearray) -> list[bytes]:
    """Removes complete events from `buf`; returns their data payloads."""
    if b"\r" in buf:
        buf[:] = buf.replace(b"\r\n", b"\n")
    out = []
    while True:
        end = buf.find(b"\n\n")
        if end < 0:
            return out
        block = bytes(buf[:end])
        del buf[:end + 2]
        data = [line[5:].lstrip(b" ") if line.startswith(b"data:") else None for line in block.split(b"\n")]
        data = [d for d in data if d is not None]
        if data:
            out.append(b"\n".join(data))


async def chat_once(port: int, body: bytes, stream: bool, rec: dict, t0: float) -> None:
    """One chat completion through the gateway; fills `rec` as it goes."""
    t_send = time.perf_counter()
    rec["t_send"] = round(t_send - t0, 4)
    reader, writer = await asyncio.open_connection(HOST, port, limit=1 << 20)
    try:
        writer.write(request_bytes("POST", port, "/v1/chat/completions", body))
        await writer.drain()
        status, headers = await read_head(reader)
        rec["status"] = status
        rec["t_head_ms"] = round((time.perf_counter() - t_send) * 1000, 2)
        rec["deployment"] = headers.get("x-llmgate-deployment")
        if rec["deployment"]:
            rec["provider"] = rec["deployment"].split("/", 1)[0]
        if "x-llmgate-attempts" in headers:
            try:
                rec["attempts"] = int(headers["x-llmgate-attempts"])
            except ValueError:
                pass
        # docs/routing.md: "hedge-won" | "primary-won" when a hedge ran (the
        # brief of the benchmark said "1"; any value but 0/false counts).
        hedged = headers.get("x-llmgate-hedged", "").strip().lower()
        rec["hedged"] = hedged not in ("", "0", "false", "no")
        if rec["hedged"]:
            rec["hedged_value"] = hedged
        if headers.get("x-llmgate-failed"):
            rec["failed_header"] = headers["x-llmgate-failed"]
        rec["policy_header"] = headers.get("x-llmgate-policy")
        if headers.get("x-llmgate-ttft-ms"):
            try:
                rec["gw_ttft_ms"] = float(headers["x-llmgate-ttft-ms"])
            except ValueError:
                pass
        if headers.get("x-llmgate-route"):
            rec["route_header"] = headers["x-llmgate-route"]
        trailers: dict[str, str] = {}
        if status != 200:
            data = b"".join([p async for p in body_pieces(reader, headers, trailers)])
            msg = ""
            try:
                msg = json.loads(data)["error"]["message"]
            except Exception:
                msg = data[:200].decode(errors="replace")
            rec["error"] = f"HTTP {status}"
            rec["error_detail"] = str(msg)[:300]
            return
        if stream:
            buf = bytearray()
            done = False
            content_events = 0
            async for piece in body_pieces(reader, headers, trailers):
                now = time.perf_counter()
                buf += piece
                for data in parse_sse_events(buf):
                    if data == b"[DONE]":
                        done = True
                        continue
                    try:
                        ev = json.loads(data)
                    except ValueError:
                        rec["error"] = rec.get("error") or "malformed event"
                        rec["error_detail"] = data[:200].decode(errors="replace")
                        continue
                    if not isinstance(ev, dict):
                        continue
                    if "error" in ev and ev["error"]:
                        err = ev["error"]
                        rec["error"] = "error event"
                        rec["error_detail"] = (err.get("message") if isinstance(err, dict) else str(err))[:300]
                        continue
                    choices = ev.get("choices") or []
                    if choices and isinstance(choices[0], dict):
                        content = (choices[0].get("delta") or {}).get("content")
                        if content:
                            content_events += 1
                            if rec.get("ttft_ms") is None:
                                rec["ttft_ms"] = round((now - t_send) * 1000, 2)
                    usage = ev.get("usage")
                    if isinstance(usage, dict):
                        rec["prompt_tokens"] = usage.get("prompt_tokens")
                        rec["output_tokens"] = usage.get("completion_tokens")
                        rec["cached_tokens"] = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
            rec["content_events"] = content_events
            if not done and not rec.get("error"):
                rec["error"] = "no [DONE]"
        else:
            data = b"".join([p async for p in body_pieces(reader, headers, trailers)])
            try:
                doc = json.loads(data)
                rec["output_tokens"] = doc["usage"]["completion_tokens"]
                rec["prompt_tokens"] = doc["usage"]["prompt_tokens"]
                rec["cached_tokens"] = (doc["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")
                if not doc.get("choices"):
                    raise ValueError("no choices")
            except Exception as e:
                rec["error"] = "bad body"
                rec["error_detail"] = f"{e}: {data[:200].decode(errors='replace')}"
        if rec.get("output_tokens") is None and trailers.get("x-llmgate-output-tokens"):
            try:
                rec["output_tokens"] = int(trailers["x-llmgate-output-tokens"])
            except ValueError:
                pass
        rec["e2e_ms"] = round((time.perf_counter() - t_send) * 1000, 2)
    finally:
        await close_writer(writer)


class Conversations:
    """Conversation mode: the conversations of one run, each sent one turn at
    a time (a client waits for an answer before its next message), each
    turn's history byte for byte what the previous turn sent."""

    def __init__(self, spec: dict, seed: int):
        self.spec = spec
        self.system = ("You are the assistant of a routing benchmark. " * (spec["system_chars"] // 46 + 1))[
            :spec["system_chars"]]
        self.slots = [{"id": i, "messages": [], "turn": 0, "busy": False, "last_provider": None}
                      for i in range(spec["concurrent"])]
        self.next_id = spec["concurrent"]
        self.rng = random.Random(seed)

    def take(self, index: int) -> Optional[dict]:
        """A conversation not waiting for an answer, at random (users do not
        take turns in order)."""
        idle = [slot for slot in self.slots if not slot["busy"]]
        if not idle:
            return None
        slot = self.rng.choice(idle)
        slot["busy"] = True
        return slot

    def messages(self, slot: dict) -> list:
        words = f"conversation {slot['id']} turn {slot['turn']}: "
        filler = "".join(self.rng.choice("abcdefghij klmnop") for _ in range(max(0, self.spec["turn_chars"] - len(words))))
        user = {"role": "user", "content": words + filler}
        slot["pending"] = user
        return [{"role": "system", "content": self.system}] + slot["messages"] + [user]

    def done(self, slot: dict, provider: Optional[str], ok: bool) -> None:
        if ok:
            slot["messages"] += [slot.pop("pending"),
                                 {"role": "assistant", "content": f"answer {slot['id']}.{slot['turn']}"}]
            slot["turn"] += 1
            slot["last_provider"] = provider
        if not ok or slot["turn"] >= self.spec["turns"]:
            slot.update({"id": self.next_id, "messages": [], "turn": 0, "last_provider": None})
            self.next_id += 1
        slot["busy"] = False


async def one_request(port: int, scn: Scenario, pol: Policy, a: Arrival, t0: float,
                      oracle_target: Optional[str], records: list,
                      conversations: Optional[Conversations] = None) -> None:
    slot = None
    messages = [{"role": "user", "content": scn.prompt}]
    if a.long:
        messages = [{"role": "user", "content": f"request {a.index}: " + "lorem ipsum " * (scn.long_prompts["chars"] // 12)}]
    if conversations is not None:
        slot = conversations.take(a.index)
        if slot is None:
            return  # every conversation is waiting for its answer
        messages = conversations.messages(slot)
        # The affinity oracle sends a follow-up where its conversation's
        # previous turn went (its prefix is cached there).
        if oracle_target and slot["last_provider"]:
            oracle_target = slot["last_provider"]
    body: dict = {"model": scn.model, "messages": messages, "stream": a.stream}
    if a.stream:
        body["stream_options"] = {"include_usage": True}
    if scn.max_tokens is not None:
        body["max_tokens"] = scn.max_tokens
    route = copy.deepcopy(pol.route)
    if oracle_target:
        route.update({"order": [oracle_target], "allow_fallbacks": False})
    if route:
        body["route"] = route
    rec: dict = {"i": a.index, "at": round(a.at, 4), "stream": a.stream, "status": None, "deployment": None,
                 "provider": None, "attempts": None, "hedged": False, "ttft_ms": None, "e2e_ms": None,
                 "output_tokens": None, "prompt_tokens": None, "error": None}
    if oracle_target:
        rec["oracle_target"] = oracle_target
    if slot is not None:
        rec["conversation"], rec["turn"] = slot["id"], slot["turn"]
    if a.long:
        rec["long"] = True
    records.append(rec)
    try:
        await asyncio.wait_for(chat_once(port, json.dumps(body).encode(), a.stream, rec, t0), scn.client_timeout_s)
    except asyncio.TimeoutError:
        rec["error"] = rec.get("error") or f"client timeout ({scn.client_timeout_s:.0f} s)"
    except (OSError, HttpError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
        rec["error"] = rec.get("error") or f"transport: {type(e).__name__}: {e}"[:200]
    except asyncio.CancelledError:
        raise
    except Exception as e:  # a response this client could not make sense of
        rec["error"] = rec.get("error") or f"client: {type(e).__name__}: {e}"[:200]
    finally:
        if slot is not None:
            conversations.done(slot, rec.get("provider"), not rec.get("error"))


# ---------------------------------------------------------------------------
# One run: fresh sims, fresh gateway, traffic, changes, stats.

@dataclass
class RunResult:
    scenario: str
    policy: str
    duration_s: float
    records: list
    changes: list        # applied changes: {at_s, applied_s, provider, label, expect, profile}
    sim_stats: dict
    config: dict
    warnings: list
    started: str
    gateway_routes: Optional[dict] = None  # GET /admin/routes after the run
    # The router's TTFT estimate of each provider, sampled from /admin/routes
    # every ESTIMATE_EVERY_S during the run (scenarios with an
    # estimate_vs_median target): [{"t": s, "est": {provider: ms}}].
    estimates: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    loadgen: Optional[dict] = None  # llmgate-loadgen's JSON, in loadgen mode


ESTIMATE_EVERY_S = 0.5


async def sample_estimates(scn: Scenario, gw_port: int, t0: float, duration: float, out: list) -> None:
    """The router's TTFT estimate of each provider, every ESTIMATE_EVERY_S."""
    ids = {f"{p.name}/{p.model}": p.name for p in scn.providers}
    while time.perf_counter() - t0 < duration:
        await asyncio.sleep(ESTIMATE_EVERY_S)
        try:
            st, routes = await http_call(gw_port, "GET", "/admin/routes")
        except (OSError, HttpError, asyncio.TimeoutError):
            continue
        if st != 200 or not isinstance(routes, dict):
            continue
        est = {}
        for m in routes.get("models") or []:
            for d in m.get("deployments") or []:
                name = ids.get(d.get("deployment"))
                e = (d.get("ttft_ms") or {}).get("estimate")
                if name and isinstance(e, (int, float)):
                    est[name] = float(e)
        out.append({"t": round(time.perf_counter() - t0, 3), "est": est})


async def run_loadgen(scn: Scenario, args, gw_port: int, duration: float, tmp: Path, procs) -> dict:
    """Loadgen mode: llmgate-loadgen holds scn.connections streams open."""
    body: dict = {"model": scn.model, "stream": True,
                  "messages": [{"role": "user", "content": scn.prompt}]}
    if scn.max_tokens is not None:
        body["max_tokens"] = scn.max_tokens
    (tmp / "body.json").write_text(json.dumps(body))
    out = tmp / "loadgen.json"
    argv = [str(args.loadgen), "--url", f"http://{HOST}:{gw_port}/v1/chat/completions",
            "--body-file", str(tmp / "body.json"), "--connections", str(scn.connections),
            "--ramp", f"{scn.ramp_s:g}", "--warmup", "0", "--duration", f"{duration:g}",
            "--drain", f"{scn.client_timeout_s:g}", "--json", str(out), "--quiet"]
    proc = procs.start("loadgen", argv)
    while proc.poll() is None:
        await asyncio.sleep(0.2)
    if proc.returncode != 0 or not out.exists():
        raise BenchError(f"llmgate-loadgen failed ({proc.returncode})\n{procs.log_of('loadgen')}")
    return json.loads(out.read_text())


async def run_one(scn: Scenario, pol: Policy, args, duration: float, changes: list[Change]) -> RunResult:
    tmp = Path(tempfile.mkdtemp(prefix=f"llmgate-bench-{scn.name}-"))
    procs = ProcGroup(tmp)
    warnings: list[str] = []
    started = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    try:
        # Sims: one process per provider, each with its own seed.
        sim_procs = {}
        for i, p in enumerate(scn.providers):
            argv = [str(args.sim), "--listen", f"{HOST}:0", "--port-file", str(tmp / f"sim-{p.name}.port"),
                    "--seed", str(scn.seed * 100 + i + 1), "--model", f"{p.model}={json.dumps(p.profile)}"]
            sim_procs[p.name] = procs.start(f"sim-{p.name}", argv)
        ports: dict[str, int] = {}
        for p in scn.providers:
            try:
                ports[p.name] = await wait_port_file(tmp / f"sim-{p.name}.port", sim_procs[p.name],
                                                     f"llmgate-sim for provider {p.name}")
            except BenchError as e:
                raise BenchError(f"{e}\n--- its output ---\n{procs.log_of('sim-' + p.name)}")
        profiles: dict[str, dict] = {}
        initial: dict[str, dict] = {}
        for p in scn.providers:
            st, prof = await http_call(ports[p.name], "GET", "/admin/profiles/" + urllib.parse.quote(p.model, safe=""))
            if st != 200 or not isinstance(prof, dict):
                raise BenchError(f"sim {p.name}: GET profile answered {st}: {prof}")
            profiles[p.name] = prof
            initial[p.name] = copy.deepcopy(prof)

        # Gateway.
        cfg = gateway_config(scn, pol, ports, args.plain_config)
        cfg_path = tmp / "llmgate.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        gw_port_file = tmp / "llmgate.port"
        gw = procs.start("gateway", [str(args.gateway), "--config", str(cfg_path), "--port-file", str(gw_port_file),
                                     "--log-level", args.gateway_log_level])
        try:
            gw_port = await wait_port_file(gw_port_file, gw, "llmgate")
        except BenchError as e:
            raise BenchError(f"the gateway did not start for {scn.name}/{pol.name}: {e}\n"
                             f"--- config ({cfg_path}) ---\n{cfg_path.read_text()}"
                             f"--- gateway output ---\n{procs.log_of('gateway')}", EXIT_GATEWAY_REFUSED)

        # Traffic and changes, on one clock.
        t0 = time.perf_counter()
        records: list = []
        applied: list = []

        async def apply(c: Change) -> None:
            await asyncio.sleep(max(0.0, t0 + c.at_s - time.perf_counter()))
            p = scn.provider(c.provider)
            patch = initial[p.name] if c.restore else c.profile
            t_apply = time.perf_counter() - t0
            st, prof = await http_call(ports[p.name], "PUT", "/admin/profiles/" + urllib.parse.quote(p.model, safe=""),
                                       patch)
            if st != 200 or not isinstance(prof, dict):
                raise BenchError(f"change {c.label!r}: sim {p.name} answered {st}: {prof}")
            profiles[p.name] = prof
            applied.append({"at_s": c.at_s, "applied_s": round(t_apply, 4), "provider": c.provider,
                            "label": c.label, "expect": c.expect, "threshold": c.threshold,
                            "patch": patch, "profile": prof})

        change_tasks = [asyncio.create_task(apply(c)) for c in changes]
        estimates: list = []
        if any(t["type"] == "estimate_vs_median" for t in scn.targets):
            change_tasks.append(asyncio.create_task(sample_estimates(scn, gw_port, t0, duration, estimates)))
        req_tasks = []
        loadgen = None
        if scn.connections:
            loadgen = await run_loadgen(scn, args, gw_port, duration, tmp, procs)
        conversations = Conversations(scn.conversation, scn.seed) if scn.conversation else None
        for a in ([] if scn.connections else arrivals(scn, duration)):
            delay = t0 + a.at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tokens = (scn.long_prompts["chars"] / 4) if a.long else 0  # the sims' 4 chars a token
            target = oracle_pick(scn, profiles, tokens) if pol.oracle else None
            req_tasks.append(asyncio.create_task(one_request(gw_port, scn, pol, a, t0, target, records,
                                                             conversations)))
            if gw.poll() is not None:
                break
        await asyncio.gather(*change_tasks)
        if req_tasks:
            await asyncio.wait(req_tasks)
        if gw.poll() is not None:
            raise BenchError(f"the gateway exited with status {gw.returncode} during {scn.name}/{pol.name}\n"
                             f"--- gateway output ---\n{procs.log_of('gateway')}", EXIT_GATEWAY_DIED)

        # The gateway's own view at the end (best effort: older gateways have no
        # /admin/routes): hedges started/won/denied, retries denied, estimates.
        gateway_routes = None
        try:
            st, routes = await http_call(gw_port, "GET", "/admin/routes")
            if st == 200 and isinstance(routes, dict):
                gateway_routes = routes
        except (OSError, HttpError, asyncio.TimeoutError):
            pass
        sim_stats = {}
        for p in scn.providers:
            try:
                st, stats = await http_call(ports[p.name], "GET", "/admin/stats")
                sim_stats[p.name] = stats if st == 200 else None
            except (OSError, HttpError, asyncio.TimeoutError):
                sim_stats[p.name] = None
        records.sort(key=lambda r: r["i"])
        gw_lines = [l for l in procs.log_of("gateway", 20000).splitlines()
                    if l.strip() and "listening on" not in l]
        if gw_lines:
            warnings.append(f"gateway logged {len(gw_lines)} line(s), last: {gw_lines[-1][:300]}")
        return RunResult(scn.name, pol.name, duration, records, applied, sim_stats, cfg, warnings, started,
                         gateway_routes, loadgen=loadgen, estimates=estimates)
    finally:
        procs.stop()
        if args.keep_tmp:
            log(f"  (kept {tmp})")
        else:
            for f in tmp.iterdir():
                try:
                    f.unlink()
                except OSError:
                    pass
            try:
                tmp.rmdir()
            except OSError:
                pass


# ---------------------------------------------------------------------------
# Metrics.

def percentile(values: list[float], q: float) -> Optional[float]:
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def reaction(records: list, change: dict, end_s: float, window: float = 1.0, step: float = 0.05,
             min_requests: int = 5) -> dict:
    """Time from a change until the provider's share of served requests over a
    sliding window (requests sent after the change only) falls below the
    threshold (expect: leave) or reaches it again (expect: return)."""
    out = {"label": change["label"], "provider": change["provider"], "expect": change["expect"],
           "reaction_s": None, "held": None, "share_before": None, "vacuous": False}
    if not change["expect"]:
        return out
    tc = change["applied_s"]
    limit = change.get("until_s", end_s)
    before = [r["provider"] == change["provider"] for r in records
              if r.get("provider") and r.get("t_send") is not None and tc - 2 * window <= r["t_send"] < tc]
    if before:
        out["share_before"] = round(sum(before) / len(before), 3)
        # Nothing to leave (or nothing to come back from): the reaction is not measurable.
        out["vacuous"] = (out["share_before"] < change["threshold"]) == (change["expect"] == "leave")
    served = sorted((r["t_send"], r["provider"] == change["provider"])
                    for r in records if r.get("provider") and r.get("t_send") is not None and tc <= r["t_send"] < limit)
    times = [t for t, _ in served]
    hits = [0]
    for _, mine in served:
        hits.append(hits[-1] + mine)
    thr = change["threshold"]

    def ok(lo: float, hi: float) -> Optional[bool]:
        i, j = bisect.bisect_right(times, lo), bisect.bisect_right(times, hi)
        if j - i < min_requests:
            return None
        share = (hits[j] - hits[i]) / (j - i)
        return share < thr if change["expect"] == "leave" else share >= thr

    t = tc + step
    while t <= limit + 1e-9:
        if ok(max(tc, t - window) - 1e-9, t):
            out["reaction_s"] = round(t - tc, 2)
            break
        t += step
    if out["reaction_s"] is not None:
        held = True
        t = tc + out["reaction_s"] + window
        while t <= limit + 1e-9:
            if ok(t - window, t) is False:
                held = False
                break
            t += window / 4
        out["held"] = held
    return out


def summarize_loadgen(scn: Scenario, res: RunResult) -> dict:
    lg = res.loadgen or {}
    ttft = (lg.get("latency_us") or {}).get("ttft") or {}
    ms = lambda k: (ttft[k] / 1000 if ttft.get(k) is not None and ttft.get("count") else None)  # noqa: E731
    n = int(lg.get("requests", 0))
    errors = int(lg.get("errors", 0))
    return {
        "requests": n, "errors": errors, "error_rate": errors / n if n else 0.0,
        "error_kinds": dict(lg.get("error_kinds") or {}), "streamed": n,
        "ttft_ms": {"p50": ms("p50"), "p95": None, "p99": ms("p99"), "mean": ms("mean"), "n": ttft.get("count", 0)},
        "e2e_ms": {"p50": None, "p99": None, "n": 0}, "cost_usd": 0.0, "attempts_per_request": None,
        "hedged": 0, "hedge_won": 0, "extra_upstream_header": None, "upstream_requests": None,
        "extra_upstream_sim": None, "share": {p.name: 0.0 for p in scn.providers}, "slices": [], "reactions": [],
        "policy_headers": [], "oracle_pin_violations": 0, "send_lag_ms": {"p50": None, "p99": None, "max": None},
        "gateway_hedges": (res.gateway_routes or {}).get("hedges"),
        "gateway_retries_denied": (res.gateway_routes or {}).get("retries_denied_by_budget"),
        "concurrent_streams": scn.connections,
    }


def summarize(scn: Scenario, res: RunResult, slice_s: float) -> dict:
    if res.loadgen is not None:
        return summarize_loadgen(scn, res)
    recs = res.records
    n = len(recs)
    errors = [r for r in recs if r["error"]]
    ok = [r for r in recs if not r["error"]]
    ttft = [r["ttft_ms"] for r in recs if r["stream"] and r["ttft_ms"] is not None]
    e2e = [r["e2e_ms"] for r in ok if r["e2e_ms"] is not None]
    prices = {p.name: p.price for p in scn.providers}
    cost = 0.0
    for r in ok:
        pr = prices.get(r.get("provider") or "", {})
        cost += ((r.get("prompt_tokens") or 0) * float(pr.get("input_per_1m", 0)) +
                 (r.get("output_tokens") or 0) * float(pr.get("output_per_1m", 0))) / 1e6
    attempts = [r["attempts"] for r in recs if r.get("attempts") is not None]
    hedged = sum(1 for r in recs if r.get("hedged"))
    hedge_won = sum(1 for r in recs if r.get("hedged_value") == "hedge-won")
    # Extra upstream requests from the headers: attempts beyond the first, plus
    # a hedge the attempts did not count. (llmgate counts both sides of a hedge
    # race in x-llmgate-attempts, so a hedged response has attempts >= 2 and
    # adds nothing more; a gateway that did not would report attempts 1.)
    extra_hdr = ((sum(a - 1 for a in attempts) +
                  sum(1 for r in recs if r.get("hedged") and (r.get("attempts") or 1) < 2)) / n
                 if n and attempts else None)
    sim_requests = None
    if res.sim_stats and all(isinstance(s, dict) for s in res.sim_stats.values()):
        sim_requests = sum(int(s.get("requests", 0)) for s in res.sim_stats.values())
    served = [r for r in recs if r.get("provider")]
    names = [p.name for p in scn.providers]
    share = {p: (sum(1 for r in served if r["provider"] == p) / len(served) if served else 0.0) for p in names}
    slices = []
    t = 0.0
    while t < res.duration_s - 1e-9:
        hi = min(t + slice_s, res.duration_s)
        sl = [r for r in served if t <= r["at"] < hi]
        slices.append({"from_s": round(t, 2), "to_s": round(hi, 2), "requests": len(sl),
                       "share": {p: (sum(1 for r in sl if r["provider"] == p) / len(sl) if sl else 0.0) for p in names}})
        t = hi
    changes = sorted(res.changes, key=lambda c: c["applied_s"])
    for i, c in enumerate(changes):
        nxt = [d["applied_s"] for d in changes[i + 1:] if d["provider"] == c["provider"]]
        c["until_s"] = nxt[0] if nxt else res.duration_s
    reactions = [reaction(recs, c, res.duration_s) for c in changes]
    policy_headers = sorted({r["policy_header"] for r in recs if r.get("policy_header")})
    error_kinds: dict[str, int] = {}
    for r in errors:
        error_kinds[r["error"]] = error_kinds.get(r["error"], 0) + 1
    lags = [(r["t_send"] - r["at"]) * 1000 for r in recs if r.get("t_send") is not None]
    oracle_miss = sum(1 for r in recs if r.get("oracle_target") and r.get("provider")
                      and r["provider"] != r["oracle_target"])
    # Conversation mode: the follow-up turns (a prefix of theirs was read
    # before), their TTFT and how much of their prompts the providers read
    # from a cache; a cache hit is one that read more than the shared
    # system prompt (the conversation's own history was cached).
    long_ttft = [r["ttft_ms"] for r in recs if r.get("long") and r["stream"] and r["ttft_ms"] is not None]
    short_ttft = [r["ttft_ms"] for r in recs if not r.get("long") and r["stream"] and r["ttft_ms"] is not None]
    long_failed_over = sum(1 for r in recs if r.get("long") and "ttft_timeout" in (r.get("failed_header") or ""))
    follow = [r for r in recs if (r.get("turn") or 0) > 0 and r["stream"] and r["ttft_ms"] is not None]
    follow_ttft = [r["ttft_ms"] for r in follow]
    system_tokens = (scn.conversation["system_chars"] / 4) if scn.conversation else 0
    cached_share = None
    if follow and any(r.get("prompt_tokens") for r in follow):
        cached_share = (sum(r.get("cached_tokens") or 0 for r in follow) /
                        max(1, sum(r.get("prompt_tokens") or 0 for r in follow)))
    return {
        "requests": n, "errors": len(errors), "error_rate": len(errors) / n if n else 0.0,
        "error_kinds": error_kinds,
        "streamed": sum(1 for r in recs if r["stream"]),
        "ttft_ms": {"p50": percentile(ttft, 50), "p95": percentile(ttft, 95), "p99": percentile(ttft, 99),
                    "mean": (sum(ttft) / len(ttft)) if ttft else None, "n": len(ttft)},
        "e2e_ms": {"p50": percentile(e2e, 50), "p99": percentile(e2e, 99),
                   "mean": (sum(e2e) / len(e2e)) if e2e else None, "n": len(e2e)},
        "estimates": res.estimates,
        "cost_usd": cost,
        "attempts_per_request": (sum(attempts) / len(attempts)) if attempts else None,
        "hedged": hedged, "hedge_won": hedge_won,
        "extra_upstream_header": extra_hdr,
        "upstream_requests": sim_requests,
        "extra_upstream_sim": (sim_requests / n - 1) if n and sim_requests is not None else None,
        "share": share, "slices": slices, "reactions": reactions, "policy_headers": policy_headers,
        "oracle_pin_violations": oracle_miss,
        "send_lag_ms": {"p50": percentile(lags, 50), "p99": percentile(lags, 99), "max": max(lags, default=None)},
        "gateway_hedges": (res.gateway_routes or {}).get("hedges"),
        "gateway_retries_denied": (res.gateway_routes or {}).get("retries_denied_by_budget"),
        "followup_ttft_ms": {"p50": percentile(follow_ttft, 50), "p95": percentile(follow_ttft, 95),
                             "mean": (sum(follow_ttft) / len(follow_ttft)) if follow_ttft else None,
                             "n": len(follow_ttft)},
        "followup_cache_hits": (sum(1 for r in follow if (r.get("cached_tokens") or 0) > system_tokens * 1.05)
                                / len(follow)) if follow else None,
        "followup_cached_share": cached_share,
        "long_ttft_ms": {"p50": percentile(long_ttft, 50), "mean": (sum(long_ttft) / len(long_ttft)) if long_ttft else None,
                         "n": len(long_ttft), "deadline_kills": long_failed_over},
        "short_ttft_ms": {"p50": percentile(short_ttft, 50), "p95": percentile(short_ttft, 95), "n": len(short_ttft)},
    }


# ---------------------------------------------------------------------------
# Report.

def fmt_ms(v: Optional[float]) -> str:
    return "—" if v is None else (f"{v:.0f}" if v >= 10 else f"{v:.1f}")


def fmt_pct(v: Optional[float], digits: int = 1) -> str:
    return "—" if v is None else f"{100 * v:.{digits}f}%"


def fmt_share(share: dict) -> str:
    return " · ".join(f"{p} {100 * s:.0f}" for p, s in share.items())


def fmt_reaction(r: dict) -> str:
    if not r["expect"]:
        return "n/a"
    if r.get("vacuous"):
        return f"n/a ({100 * r['share_before']:.0f}% before)"
    if r["reaction_s"] is None:
        return "not reached"
    return f"{r['reaction_s']:.2f} s" + ("" if r["held"] else " (relapsed)")


def scenario_markdown(scn: Scenario, results: list[RunResult], targets: list[str], duration: float,
                      changes: list[Change]) -> str:
    out = [f"## {scn.name}", ""]
    if scn.description:
        out += [scn.description, ""]
    prov = ", ".join(
        f"{p.name} (ttft {fmt_ms(dist_mean(p.profile.get('ttft_ms', 200)))} ms, tps {fmt_ms(dist_mean(p.profile.get('tps', 50)))}, "
        f"${p.price.get('input_per_1m', 0)}/${p.price.get('output_per_1m', 0)} per 1M in/out)" for p in scn.providers)
    if scn.connections:
        out += [f"{duration:.0f} s, {scn.connections} concurrent streams held open by llmgate-loadgen "
                f"(closed loop, opened over {scn.ramp_s:g} s), max_tokens {scn.max_tokens}. Providers: {prov}.", ""]
    else:
        out += [f"{duration:.0f} s at {scn.rate:g} req/s (Poisson, seed {scn.seed}), "
                f"{100 * scn.stream_share:.0f}% streamed, max_tokens {scn.max_tokens}. Providers: {prov}.", ""]
    if changes:
        out += ["Changes: " + "; ".join(f"t={c.at_s:g} s {c.label}" for c in changes) + ".", ""]
    change_cols = [f"react c{i + 1}" for i in range(len(changes))]
    head = ["policy", "req", "err", "TTFT p50", "p95", "p99", "e2e p50", "p99", "cost $", "att/req",
            "upstream/req", "extra %", "hedged", "share %"] + change_cols
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join(["---"] * len(head)) + "|")
    for res in results:
        s = res.summary
        up = "—" if s["upstream_requests"] is None else f"{s['upstream_requests'] / s['requests']:.2f}" if s["requests"] else "—"
        extra = "—" if s["extra_upstream_sim"] is None else fmt_pct(s["extra_upstream_sim"])
        row = [res.policy, str(s["requests"]), f"{s['errors']} ({fmt_pct(s['error_rate'])})",
               fmt_ms(s["ttft_ms"]["p50"]), fmt_ms(s["ttft_ms"]["p95"]), fmt_ms(s["ttft_ms"]["p99"]),
               fmt_ms(s["e2e_ms"]["p50"]), fmt_ms(s["e2e_ms"]["p99"]), f"{s['cost_usd']:.4f}",
               "—" if s["attempts_per_request"] is None else f"{s['attempts_per_request']:.2f}", up, extra,
               f"{s['hedged']} ({s['hedge_won']} won)" if s["hedged"] else "0", fmt_share(s["share"])]
        row += [fmt_reaction(r) for r in s["reactions"]]
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    out.append("Times in ms (TTFT: streamed requests that got a first token; e2e: successful requests). "
               "`react cN`: seconds from change N until the provider's share of served requests "
               "over a 1 s window crossed the threshold.")
    out.append("")
    if scn.long_prompts:
        lp = scn.long_prompts
        out += [f"Long prompts: {100 * lp['share']:.0f}% of requests carry {lp['chars']} chars "
                f"(~{lp['chars'] // 4} tokens). Deadline kills: long requests whose `x-llmgate-failed` names "
                "a ttft_timeout (a deployment given up before its first token).", ""]
        head = ["policy", "long n", "long TTFT mean", "p50", "deadline kills", "short p50", "short p95"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---"] * len(head)) + "|")
        for res in results:
            lt, st = res.summary["long_ttft_ms"], res.summary["short_ttft_ms"]
            out.append("| " + " | ".join([res.policy, str(lt["n"]), fmt_ms(lt["mean"]), fmt_ms(lt["p50"]),
                                          str(lt["deadline_kills"]), fmt_ms(st["p50"]), fmt_ms(st["p95"])]) + " |")
        out.append("")
    if scn.conversation:
        c = scn.conversation
        out += [f"Conversations: {c['concurrent']} at a time, {c['turns']} turns each, a shared system prompt "
                f"of {c['system_chars']} chars, {c['turn_chars']} chars a user turn. Follow-up turns "
                "(a prefix read before); cache hit: the provider read more than the system prompt "
                "from its cache. The oracle sends each follow-up where its previous turn went.", ""]
        head = ["policy", "follow-ups", "TTFT mean", "p50", "p95", "cache hits", "cached share"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---"] * len(head)) + "|")
        for res in results:
            f = res.summary["followup_ttft_ms"]
            out.append("| " + " | ".join([res.policy, str(f["n"]), fmt_ms(f["mean"]), fmt_ms(f["p50"]),
                                          fmt_ms(f["p95"]), fmt_pct(res.summary["followup_cache_hits"]),
                                          fmt_pct(res.summary["followup_cached_share"])]) + " |")
        out.append("")
    if results and results[0].summary["slices"]:
        sl0 = results[0].summary["slices"]
        head = ["policy"] + [f"{s['from_s']:g}–{s['to_s']:g} s" for s in sl0]
        out += ["Share of served requests per provider (%), per slice:", ""]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---"] * len(head)) + "|")
        for res in results:
            out.append("| " + " | ".join([res.policy] + [fmt_share(s["share"]) for s in res.summary["slices"]]) + " |")
        out.append("")
    notes = []
    for res in results:
        s = res.summary
        if s["error_kinds"]:
            notes.append(f"{res.policy}: errors " + ", ".join(f"{k} ×{v}" for k, v in sorted(s["error_kinds"].items())))
        expected = None
        for p in scn.policies:
            if p.name == res.policy and not p.oracle:
                expected = p.route.get("policy") or p.routing.get("policy")
        if not s["policy_headers"]:
            notes.append(f"{res.policy}: the gateway sent no x-llmgate-policy header")
        elif expected and s["policy_headers"] != [expected]:
            notes.append(f"{res.policy}: x-llmgate-policy was {', '.join(s['policy_headers'])} (expected {expected})")
        gh = s.get("gateway_hedges")
        if isinstance(gh, dict) and (gh.get("started") or gh.get("denied_by_budget")):
            notes.append(f"{res.policy}: gateway hedges started {gh.get('started')}, won {gh.get('won')}, "
                         f"denied by budget {gh.get('denied_by_budget')}")
        if s.get("gateway_retries_denied"):
            notes.append(f"{res.policy}: gateway retries denied by budget: {s['gateway_retries_denied']}")
        if (s["send_lag_ms"]["p99"] or 0) > 50:
            notes.append(f"{res.policy}: the load generator fell behind (send lag p99 "
                         f"{s['send_lag_ms']['p99']:.0f} ms, max {s['send_lag_ms']['max']:.0f} ms): the machine is busy")
        if s["oracle_pin_violations"]:
            notes.append(f"{res.policy}: {s['oracle_pin_violations']} pinned requests were served elsewhere "
                         f"(route.order ignored?)")
        for w in res.warnings:
            notes.append(f"{res.policy}: {w}")
    if notes:
        out += ["Notes:", ""] + [f"- {n}" for n in notes] + [""]
    if targets:
        out += ["Targets:", "", "```"] + targets + ["```", ""]
    return "\n".join(out)


def evaluate_targets(scn: Scenario, results: list[RunResult]) -> list[str]:
    by = {r.policy: r.summary for r in results}
    lines = []

    def missing(*names):
        gone = [n for n in names if n not in by]
        return f"SKIP  (not run: {', '.join(gone)})" if gone else None

    for t in scn.targets:
        kind = t["type"]
        if kind in RATIO_TARGETS:
            metric, q, default_pol, default_ratio = RATIO_TARGETS[kind]
            pol, ratio = t.get("policy", default_pol), float(t.get("max_ratio", default_ratio))
            label = RATIO_LABELS[metric]
            name = f"{pol} {label} {q} within {ratio:g}x the oracle's"
            skip = missing(pol, "oracle")
            if skip:
                lines.append(f"{skip} {name}")
                continue
            a, o = by[pol][metric][q], by["oracle"][metric][q]
            if a is None or o is None:
                lines.append(f"MISS  {name}: not measured")
            else:
                lines.append(f"{'PASS' if a <= ratio * o else 'MISS'}  {name}: {a:.0f} ms vs {o:.0f} ms "
                             f"({a / o:.2f}x)")
        elif kind == "cache_hit_share":
            pol, share = t.get("policy", "latency"), float(t.get("min_ratio", 0.9))
            name = f"{pol} follow-up cache hits at least {100 * share:.0f}% of the oracle's"
            skip = missing(pol, "oracle")
            if skip:
                lines.append(f"{skip} {name}")
                continue
            a, o = by[pol]["followup_cache_hits"], by["oracle"]["followup_cache_hits"]
            if a is None or not o:
                lines.append(f"MISS  {name}: not measured")
            else:
                lines.append(f"{'PASS' if a >= share * o else 'MISS'}  {name}: {100 * a:.1f}% vs "
                             f"{100 * o:.1f}% ({a / o:.2f}x)")
        elif kind == "cost_vs_oracle":
            pol, ratio = t.get("policy", "cost"), float(t.get("max_ratio", 1.10))
            name = f"{pol} spend within {100 * (ratio - 1):.0f}% of the oracle's (cheapest meeting the SLO)"
            skip = missing(pol, "oracle")
            if skip:
                lines.append(f"{skip} {name}")
                continue
            a, o = by[pol]["cost_usd"], by["oracle"]["cost_usd"]
            if not o:
                lines.append(f"MISS  {name}: the oracle spent nothing")
            else:
                lines.append(f"{'PASS' if a <= ratio * o else 'MISS'}  {name}: ${a:.4f} vs ${o:.4f} "
                             f"({100 * (a / o - 1):+.0f}%)")
        elif kind == "vs_static":
            pol, statics = t.get("policy", "latency"), list(t.get("static") or [])
            on = list(t.get("metrics") or ["mean", "p95"])
            name = (f"{pol} no worse than the best static choice ({', '.join(statics)}) on TTFT "
                    f"{' and '.join(on)}")
            skip = missing(pol, *statics)
            if skip:
                lines.append(f"{skip} {name}")
                continue
            slack = float(t.get("slack", 1.0))
            a = by[pol]["ttft_ms"]
            parts, good = [], True
            for q in on:
                best = min(by[x]["ttft_ms"][q] for x in statics if by[x]["ttft_ms"][q] is not None)
                good = good and a[q] is not None and a[q] <= slack * best
                parts.append(f"{q} {a[q]:.0f} vs {best:.0f} ms")
            lines.append(f"{'PASS' if good else 'MISS'}  {name}: {', '.join(parts)}")
        elif kind == "estimate_vs_median":
            # The router's estimate of a provider against its true median
            # TTFT (its profile's; for providers no change touches), over
            # the samples after `after_s`: the median of their ratios, and
            # their 10th-90th percentile range.
            pol, max_err = t.get("policy", "latency"), float(t.get("max_error", 0.10))
            after = float(t.get("after_s", 5))
            for pname in t.get("providers") or [p.name for p in scn.providers]:
                name = f"{pol}: the TTFT estimate of {pname} within {100 * max_err:.0f}% of its true median"
                skip = missing(pol)
                if skip:
                    lines.append(f"{skip} {name}")
                    continue
                prof = scn.provider(pname).profile
                truth = dist_quantile(prof.get("ttft_ms", 200), 50)
                ratios = sorted(e["est"][pname] / truth for e in by[pol]["estimates"]
                                if e["t"] >= after and pname in e["est"])
                if not ratios or truth <= 0:
                    lines.append(f"MISS  {name}: not sampled")
                    continue
                mid = percentile(ratios, 50)
                lines.append(f"{'PASS' if abs(mid - 1) <= max_err else 'MISS'}  {name}: median "
                             f"{mid * truth:.0f} ms vs {truth:.0f} ({mid:.2f}x; p10-p90 "
                             f"{percentile(ratios, 10):.2f}-{percentile(ratios, 90):.2f}x, "
                             f"{len(ratios)} samples)")
        elif kind == "reaction":
            idx, max_s = int(t.get("change", 0)), float(t.get("max_s", 2.0))
            label = scn.changes[idx].label if idx < len(scn.changes) else f"change {idx}"
            for pol in t.get("policies") or [t.get("policy", "latency")]:
                skip = missing(pol)
                name = f"{pol}: traffic reacts to '{label}' within {max_s:g} s"
                if skip:
                    lines.append(f"{skip} {name}")
                    continue
                rs = by[pol]["reactions"]
                r = rs[idx] if idx < len(rs) else None
                if r is not None and r.get("vacuous"):
                    lines.append(f"SKIP  {name}: it carried {100 * r['share_before']:.0f}% of the traffic "
                                 f"in the {2:g} s before the change")
                elif r is None or r["reaction_s"] is None:
                    lines.append(f"MISS  {name}: not reached")
                else:
                    good = r["reaction_s"] <= max_s and r["held"]
                    lines.append(f"{'PASS' if good else 'MISS'}  {name}: {fmt_reaction(r)}")
        elif kind == "zero_errors":
            pols = t.get("policies") or [t.get("policy", "latency")]
            for pol in pols:
                name = f"{pol}: zero client-visible errors"
                skip = missing(pol)
                if skip:
                    lines.append(f"{skip} {name}")
                    continue
                s = by[pol]
                detail = ", ".join(f"{k} ×{v}" for k, v in sorted(s["error_kinds"].items()))
                lines.append(f"{'PASS' if s['errors'] == 0 else 'MISS'}  {name}: {s['errors']} of {s['requests']}"
                             + (f" ({detail})" if detail else ""))
        elif kind == "extra_upstream":
            # What learning (or hedging) costs: the upstream requests the sims
            # counted beyond one per client request.
            max_extra = float(t.get("max_extra", 0.03))
            for pol in t.get("policies") or [t.get("policy", "latency")]:
                name = f"{pol}: <= {100 * max_extra:.0f}% extra upstream requests"
                skip = missing(pol)
                if skip:
                    lines.append(f"{skip} {name}")
                    continue
                s = by[pol]
                extra = s["extra_upstream_sim"]
                if extra is None:
                    extra = s["extra_upstream_header"]
                if extra is None:
                    lines.append(f"MISS  {name}: not measured")
                    continue
                lines.append(f"{'PASS' if extra <= max_extra else 'MISS'}  {name}: {fmt_pct(extra)} "
                             f"({s['upstream_requests']} upstream for {s['requests']} requests)")
        elif kind == "hedge_p99":
            hp, bp = t.get("hedged", "latency+hedge"), t.get("baseline", "latency")
            max_extra = float(t.get("max_extra", 0.10))
            min_cut = float(t.get("min_cut", 0.0))  # required relative improvement of p99
            name = (f"{hp} cuts TTFT p99 vs {bp}" + (f" by >= {100 * min_cut:.0f}%" if min_cut else "")
                    + f" with <= {100 * max_extra:.0f}% extra upstream requests")
            skip = missing(hp, bp)
            if skip:
                lines.append(f"{skip} {name}")
                continue
            h, b = by[hp], by[bp]
            hp99, bp99 = h["ttft_ms"]["p99"], b["ttft_ms"]["p99"]
            extra = h["extra_upstream_header"]
            sim_extra = h["extra_upstream_sim"]
            if extra is None:
                extra = sim_extra
            if hp99 is None or bp99 is None or extra is None:
                lines.append(f"MISS  {name}: not measured")
                continue
            good = hp99 < bp99 * (1 - min_cut) and extra <= max_extra
            sim_note = "" if sim_extra is None else f", sims counted {fmt_pct(sim_extra)}"
            lines.append(f"{'PASS' if good else 'MISS'}  {name}: p99 {hp99:.0f} vs {bp99:.0f} ms "
                         f"({100 * (hp99 / bp99 - 1):+.0f}%), "
                         f"extra {fmt_pct(extra)} (from x-llmgate-attempts/-hedged{sim_note})")
    return lines


def write_raw(path: Path, raw: dict) -> None:
    """Pretty JSON, except one line per request record."""
    requests = raw.pop("requests")
    text = json.dumps(raw, indent=1)
    lines = ",\n".join("  " + json.dumps(r, separators=(",", ":")) for r in requests)
    path.write_text(text[:-2] + ',\n "requests": [\n' + lines + "\n ]\n}\n")


def machine_info() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        nproc = os.cpu_count()
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    return {"nproc": nproc, "cpu": cpu, "host": platform.node(), "kernel": platform.release(),
            "python": platform.python_version(), "loadavg_at_start": load}


def mtime(path: Path) -> str:
    try:
        return dt.datetime.fromtimestamp(path.stat().st_mtime).astimezone().isoformat(timespec="minutes")
    except OSError:
        return "?"


def git_info() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return f"{rev}{' (uncommitted changes)' if dirty else ''}" if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ---------------------------------------------------------------------------
# Main.

def parse_args(argv: list[str]):
    ap = argparse.ArgumentParser(description="Routing-quality benchmark for llmgate (see bench/routing/README.md).")
    ap.add_argument("--scenario", help="comma-separated scenario names (default: all in --scenarios-dir)")
    ap.add_argument("--policies", help="comma-separated policies; replaces each scenario's list "
                                       "(e.g. latency,latency+hedge,oracle)")
    ap.add_argument("--quick", action="store_true", help="scale durations and change times by --quick-scale")
    ap.add_argument("--quick-scale", type=float, default=0.4, help="time scale of --quick (default 0.4)")
    ap.add_argument("--bin-dir", default=str(REPO / "build" / "bin"),
                    help="directory with llmgate and llmgate-sim (default: build/bin)")
    ap.add_argument("--gateway", help="llmgate binary (default: BIN_DIR/llmgate)")
    ap.add_argument("--sim", help="llmgate-sim binary (default: BIN_DIR/llmgate-sim)")
    ap.add_argument("--scenarios-dir", default=str(HERE / "scenarios"))
    ap.add_argument("--out", default=str(HERE / "results"), help="results directory (default: bench/routing/results)")
    ap.add_argument("--slice", type=float, default=5.0, help="time-line slice in seconds (default 5)")
    ap.add_argument("--plain-config", action="store_true",
                    help="leave every routing key out of the gateway config (gateways without routing support; "
                         "all policies then route in configured order)")
    ap.add_argument("--gateway-log-level", default="warn", choices=["debug", "info", "warn", "error"])
    ap.add_argument("--keep-tmp", action="store_true", help="keep each run's temporary directory (configs, logs)")
    ap.add_argument("--list", action="store_true", help="list scenarios and their policies, then exit")
    return ap.parse_args(argv)


def select(args) -> list[Scenario]:
    sdir = Path(args.scenarios_dir)
    files = sorted(sdir.glob("*.yaml"))
    if not files:
        raise BenchError(f"no scenarios in {sdir}")
    scenarios = [load_scenario(f) for f in files]
    if args.scenario:
        wanted = [s.strip() for s in args.scenario.split(",") if s.strip()]
        known = {s.name for s in scenarios}
        bad = [w for w in wanted if w not in known]
        if bad:
            raise BenchError(f"unknown scenario(s) {bad}; known: {sorted(known)}")
        scenarios = [s for s in scenarios if s.name in wanted]
    if args.policies:
        names = [p.strip() for p in args.policies.split(",") if p.strip()]
        for s in scenarios:
            defined = {p.name: p for p in s.policies}
            s.policies = [defined.get(n) or parse_policy(n, "--policies") for n in names]
    return scenarios


def scaled(scn: Scenario, args) -> tuple[float, list[Change]]:
    k = args.quick_scale if args.quick else 1.0
    changes = [Change(c.at_s * k, c.provider, c.profile, c.restore, c.label, c.expect, c.threshold) for c in scn.changes]
    return scn.duration_s * k, changes


async def main_async(args, command: str) -> int:
    scenarios = select(args)
    if args.list:
        for s in scenarios:
            print(f"{s.name:10s} {s.duration_s:>4.0f} s  {', '.join(p.name for p in s.policies)}")
        return EXIT_OK
    bin_dir = Path(args.bin_dir)
    args.gateway = Path(args.gateway or bin_dir / "llmgate").resolve()
    args.sim = Path(args.sim or bin_dir / "llmgate-sim").resolve()
    args.loadgen = (bin_dir / "llmgate-loadgen").resolve()
    for b in (args.gateway, args.sim):
        if not os.access(b, os.X_OK):
            raise BenchError(f"{b}: not an executable (build it, or pass --bin-dir / --gateway / --sim)")

    now = dt.datetime.now().astimezone()
    stamp = now.strftime("%Y-%m-%d_%H%M%S")
    out_dir = Path(args.out)
    raw_dir = out_dir / stamp
    raw_dir.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / f"{stamp}.md"
    mach = machine_info()
    header = [
        "# llmgate routing benchmark", "",
        f"- command: `{command}`",
        f"- date: {now.isoformat(timespec='seconds')}",
        f"- machine: {mach['nproc']} CPUs ({mach['cpu']}), {mach['host']}, Linux {mach['kernel']}, "
        f"load average at start {mach['loadavg_at_start']}",
        f"- gateway: `{args.gateway}` (built {mtime(args.gateway)}), sim: `{args.sim}` (built {mtime(args.sim)}), "
        f"repository at {git_info()}",
        f"- mode: {'quick (times x' + str(args.quick_scale) + ')' if args.quick else 'full'}"
        + (", plain config (no routing keys)" if args.plain_config else ""),
        f"- raw data: `{raw_dir}/`", "",
    ]
    print("\n".join(header), flush=True)
    sections: list[str] = []

    def write_md():
        md_path.write_text("\n".join(header) + "\n" + "\n".join(sections))

    write_md()
    all_lines = []
    for scn in scenarios:
        duration, changes = scaled(scn, args)
        results = []
        for pol in scn.policies:
            log(f"[{scn.name}] {pol.name}: {duration:.0f} s at {scn.rate:g} req/s ...")
            res = await run_one(scn, pol, args, duration, changes)
            res.summary = summarize(scn, res, args.slice)
            s = res.summary
            log(f"[{scn.name}] {pol.name}: {s['requests']} requests, {s['errors']} errors, "
                f"TTFT p50 {fmt_ms(s['ttft_ms']['p50'])} ms p99 {fmt_ms(s['ttft_ms']['p99'])} ms, "
                f"share {fmt_share(s['share'])}")
            raw = {"command": command, "scenario": scn.name, "scenario_file": str(scn.path), "policy": pol.name,
                   "policy_spec": {"base": pol.base, "routing": pol.routing, "route": pol.route},
                   "started": res.started, "duration_s": duration, "rate": scn.rate, "seed": scn.seed,
                   "machine": mach, "gateway_config": res.config, "changes": res.changes,
                   "sim_stats": res.sim_stats, "gateway_routes": res.gateway_routes, "summary": s,
                   "warnings": res.warnings, "requests": res.records}
            write_raw(raw_dir / f"{scn.name}.{pol.name}.json", raw)
            results.append(res)
        lines = evaluate_targets(scn, results)
        all_lines += [f"{scn.name}: {l}" for l in lines]
        md = scenario_markdown(scn, results, lines, duration, changes)
        print(md, flush=True)
        sections.append(md)
        write_md()
    if all_lines:
        summary = ["## Targets", ""]
        if args.plain_config:
            summary += ["(--plain-config: the gateway routed in configured order; these lines test the plumbing, "
                        "not the router)", ""]
        summary += ["```"] + all_lines + ["```", ""]
        print("\n".join(summary))
        sections.append("\n".join(summary))
    write_md()
    log(f"report: {md_path}")
    return EXIT_OK


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = " ".join(shlex.quote(a) for a in [sys.argv[0]] + argv)

    loop = asyncio.new_event_loop()
    main_task = loop.create_task(main_async(args, command))
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, main_task.cancel)
        except (ValueError, RuntimeError):  # pragma: no cover
            pass
    try:
        return loop.run_until_complete(main_task)
    except asyncio.CancelledError:
        log("interrupted: stopped every process this run started")
        return EXIT_INTERRUPTED
    except BenchError as e:
        log(f"error: {e}")
        return e.code
    finally:
        # Requests still in flight (interrupted run) are cancelled before the loop closes.
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
        _kill_leftovers()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
