#!/usr/bin/env python3
"""Scripted-fault benchmark for llmgate's failover after the first token.

One llmgate-sim plays a deployment that breaks some of its streams after
their first tokens -- cut, stalled, a malformed event, an in-band error --
and a healthy one; the gateway routes each model to the flaky deployment
first (policy ordered). For each fault, three ways to be served:

  stream, continuation   the healthy deployment declares `continuation: prefix`
  stream, none           it does not: a break ends the stream with an error event
  non-stream             the client waits for a whole answer (whole-answer failover)

and for each, how many answers came whole, whether their text is exactly the
unbroken answer (the simulator's continuation says only the words a prefix
lacks), and the time to the end of the answer against an unbroken one's,
measured in the same run. A stall is noticed at the flaky deployment's stall
deadline (3 x its streams' longest-pause p95, at least 2 s: it learns from
the streams that do not break) or the idle timeout (5 s here).

Standard library only. Run by hand (see README.md):

    python3 bench/failover/run.py [--requests 24] [--out DIR]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import harness  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
TOKENS = 120        # the answer's length
BREAK_AT = 40       # tokens before a break
TPS = 100           # tokens/s of both deployments
FAULT_RATE = 0.3    # share of the flaky deployment's streams that break
IDLE = "5s"

FAULTS = {
    "cut": {"cut_after_tokens": BREAK_AT},
    "stall": {"stall_after_tokens": BREAK_AT, "stall_ms": 600000},
    "malformed": {"malformed_after_tokens": BREAK_AT},
    "error": {"error_after_tokens": BREAK_AT},
}
MODES = ["stream+continuation", "stream", "non-stream"]


def profile(**extra) -> dict:
    p = {"ttft_ms": 150, "tps": TPS, "output_tokens": TOKENS}
    p.update(extra)
    return p


def wait_port(path: Path, procs: harness.Processes, limit: float = 20.0) -> int:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if path.exists():
            text = path.read_text().strip()
            if text.isdigit():
                return int(text)
        procs.check_alive()
        time.sleep(0.02)
    raise harness.HarnessError(f"no port in {path} within {limit} s")


def ask(port: int, model: str, stream: bool) -> dict:
    """One request: whether its answer came whole, its text, how long it took
    and who served it."""
    body = json.dumps({"model": model, "stream": stream,
                       "messages": [{"role": "user", "content": "Write a story"}]})
    t0 = time.monotonic()
    c = http.client.HTTPConnection(HOST, port, timeout=60)
    c.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    took = time.monotonic() - t0
    served = r.getheader("x-llmgate-deployment", "")
    continued = r.getheader("x-llmgate-continued", "")  # trailers are not read by http.client
    c.close()
    if not stream:
        try:
            j = json.loads(data)
            text = j["choices"][0]["message"]["content"]
            return {"whole": r.status == 200, "text": text, "s": took, "served": served}
        except (ValueError, KeyError, IndexError, TypeError):
            return {"whole": False, "text": "", "s": took, "served": served}
    text, done, error = "", 0, False
    for line in data.split("\n"):
        if not line.startswith("data: "):
            continue
        d = line[6:]
        if d == "[DONE]":
            done += 1
            continue
        j = json.loads(d)
        if "error" in j:
            error = True
            continue
        for ch in j.get("choices", []):
            text += (ch.get("delta") or {}).get("content") or ""
    return {"whole": r.status == 200 and done == 1 and not error, "text": text, "s": took,
            "served": served, "continued": continued}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=24, help="requests per fault and mode")
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--bin", default=str(REPO / "build" / "bin"))
    ap.add_argument("--out", default=str(REPO / "bench" / "failover" / "results"))
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="llmgate-failover-"))
    procs = harness.Processes(work)
    try:
        sim_args = [f"{args.bin}/llmgate-sim", "--listen", f"{HOST}:0", "--port-file", str(work / "sim.port"),
                    "--model", "healthy=" + json.dumps(profile())]
        for fault, keys in FAULTS.items():
            sim_args += ["--model", f"flaky-{fault}=" + json.dumps(profile(fault_rate=FAULT_RATE, **keys))]
        procs.start("sim", sim_args)
        sim_port = wait_port(work / "sim.port", procs)
        models = ["  - {name: reference, deployments: [{provider: sim, model: healthy}]}"]
        for fault in FAULTS:
            models.append(f"  - {{name: {fault}-cont, deployments: [{{provider: sim, model: flaky-{fault}}}, "
                          "{provider: sim, model: healthy, continuation: prefix}]}")
            models.append(f"  - {{name: {fault}-none, deployments: [{{provider: sim, model: flaky-{fault}}}, "
                          "{provider: sim, model: healthy}]}")
        # Health ejection off (its threshold out of reach): every request
        # meets the flaky deployment first, as a bench of what happens then.
        (work / "llmgate.yaml").write_text(f"""
server: {{listeners: [{{address: {HOST}, port: 0}}], workers: 2}}
timeouts: {{connect: 1s, ttft: 3s, idle: {IDLE}, total: 60s}}
routing:
  exploration: 0
  defaults: {{policy: ordered, max_attempts: 3}}
  ejection: {{consecutive_failures: 1000, error_rate: 1.0, min_requests: 1000000}}
providers:
  - {{name: sim, base_url: "http://{HOST}:{sim_port}/v1"}}
models:
""" + "\n".join(models) + "\n")
        procs.start("llmgate", [f"{args.bin}/llmgate", "--config", str(work / "llmgate.yaml"),
                                "--port-file", str(work / "gw.port"), "--log-level", "warn"])
        port = wait_port(work / "gw.port", procs)

        # Warm-up, not measured: each flaky deployment in steady use, so its
        # streams' pauses give it a stall deadline (from 10 streams on).
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
            list(pool.map(lambda m: ask(port, m, True),
                          [f"{fault}-none" for fault in FAULTS for _ in range(20)]))
        ref = [ask(port, "reference", True) for _ in range(4)]
        answer = ref[0]["text"]
        unbroken_s = statistics.median(r["s"] for r in ref)
        rows = []
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
            for fault in FAULTS:
                for mode in MODES:
                    model = f"{fault}-{'cont' if mode == 'stream+continuation' else 'none'}"
                    stream = mode != "non-stream"
                    got = list(pool.map(lambda _: ask(port, model, stream), range(args.requests)))
                    broken = [g for g in got if g["s"] > unbroken_s * 1.05 or not g["whole"]]
                    whole = [g for g in got if g["whole"]]
                    exact = [g for g in whole if g["text"] == answer]
                    slow = sorted(g["s"] - unbroken_s for g in broken if g["whole"])
                    rows.append({
                        "fault": fault, "mode": mode, "requests": len(got),
                        "whole": len(whole), "exact": len(exact), "hit": len(broken),
                        "lost": len(got) - len(whole),
                        "added_p50_s": statistics.median(slow) if slow else None,
                        "added_max_s": slow[-1] if slow else None,
                    })
                    procs.check_alive()
    finally:
        procs.stop_all()

    stamp = dt.datetime.now().strftime("%Y-%m-%d_%H%M%S")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"# Failover after the first token ({stamp})", "",
             f"{TOKENS}-token answers at {TPS} tok/s, TTFT 150 ms (unbroken: {unbroken_s:.2f} s to the end, "
             f"median of 4); the flaky deployment breaks {int(FAULT_RATE * 100)}% of its streams after "
             f"{BREAK_AT} tokens; idle timeout {IDLE}; {args.requests} requests per row, {args.concurrency} at once.",
             "`hit`: requests that met a break (slower than unbroken, or not whole); `added`: for those "
             "answered whole, the time to the end of the answer minus the unbroken one's. Each flaky "
             "deployment first served 20 streams (warm-up, not measured).", "",
             "| fault | client | requests | hit | whole answers | exactly the unbroken text | answers lost | added p50 | added max |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def secs(v):
            return "–" if v is None else f"{v:.2f} s"
        lines.append(f"| {r['fault']} | {r['mode']} | {r['requests']} | {r['hit']} | {r['whole']} | {r['exact']} | "
                     f"{r['lost']} | {secs(r['added_p50_s'])} | {secs(r['added_max_s'])} |")
    report = "\n".join(lines) + "\n"
    (out / f"{stamp}-failover.md").write_text(report)
    (out / f"{stamp}-failover.json").write_text(json.dumps({"unbroken_s": unbroken_s, "rows": rows}, indent=1))
    print(report)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except harness.HarnessError as e:
        harness.log(f"failover bench: {e}")
        sys.exit(3)
