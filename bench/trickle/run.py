#!/usr/bin/env python3
"""The trickle benchmark: what a gateway costs on LLM traffic as it really is —
thousands of long streams open at once, each trickling a token every few tens
of milliseconds, every event in its own read. For N concurrent streams from
llmgate-sim (stamped events), direct, through nginx and through llmgate in one
run with the same pinning, it reports CPU per relayed event, memory per open
stream and the delay each relay adds to an event. See bench/trickle/README.md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "overhead"))
import run as ov  # noqa: E402  (bench/overhead/run.py: processes, nginx, llmgate, /proc sampling)

REPO = HERE.parent.parent
TARGETS = ("direct", "nginx", "llmgate")
PATH = "/v1/chat/completions"


def parse_cases(text: str) -> list[tuple[int, float]]:
    """"1000:20,10000:2" -> [(1000, 20.0), (10000, 2.0)] (streams, tokens/s each)."""
    cases = []
    for part in text.split(","):
        streams, _, tps = part.partition(":")
        try:
            n, r = int(streams), float(tps or 20)
        except ValueError:
            raise ov.BenchError(f"--cases: expected STREAMS:TOKENS_PER_S, got {part!r}")
        if n < 1 or r <= 0:
            raise ov.BenchError(f"--cases: {part!r} needs at least one stream and a positive rate")
        cases.append((n, r))
    return cases


def start_sim(procs: ov.Procs, args, workdir: Path, tps: float) -> tuple[ov.Child, int, dict]:
    profile = {"ttft_ms": args.ttft_ms, "tps": tps, "output_tokens": args.tokens}
    child, port = ov.start_sim_profile(procs, args.sim, workdir, {args.load_cpu}, profile,
                                       extra=("--stamp-events",), name=f"sim-{tps:g}")
    return child, port, profile


def nginx_conf(workdir: Path, listen: int, upstream: int, streams: int) -> str:
    # Two connections per stream (client and upstream), whatever the
    # overhead bench's default.
    text = ov.proxy_nginx_conf(workdir, [(listen, upstream)])
    old = next(line for line in text.splitlines() if "worker_connections" in line)
    return text.replace(old, f"    worker_connections {2 * streams + 1024};")


def llmgate_config(upstream: int, streams: int) -> dict:
    cfg = ov.llmgate_config(upstream, 1, streams + 64)
    cfg["server"]["limits"] = {"max_connections": streams + 1024}
    cfg["timeouts"] = {"connect": "5s", "ttft": "30s", "idle": "30s", "total": "600s"}
    cfg["routing"] = {"exploration": 0}
    return cfg


def settle(sim_port: int, procs: ov.Procs, timeout: float = 120.0) -> None:
    """Until the sim has no stream open (the last run's drain is over)."""
    ov.wait_until("the sim's streams to end", lambda: int(ov.sim_stats(sim_port)["in_flight"]) == 0,
                  procs, timeout)


def run_one(target: str, port: int, pids, streams: int, args, workdir: Path, procs: ov.Procs,
            label: str) -> dict:
    out = workdir / f"{label}.{target}.json"
    argv = [str(args.loadgen), "--url", f"http://{ov.HOST}:{port}{PATH}", "--stream",
            "--connections", str(streams), "--ramp", f"{args.ramp:g}", "--warmup", f"{args.warmup:g}",
            "--duration", f"{args.duration:g}", "--drain", f"{args.drain:g}", "--cpu", str(args.load_cpu),
            "--event-delay", "--json", str(out), "--quiet"]
    if args.history_kib:
        body = workdir / "body-stream.json"
        body.write_bytes(ov.request_body(True, args.history_kib))
        argv += ["--body-file", str(body)]
    idle = ov.memory_of(pids()) if pids else None
    ov.log(f"  {label} {target}: {streams} streams, {args.warmup:g} s warm-up, {args.duration:g} s measured ...")
    lg = subprocess.Popen(argv, preexec_fn=ov.harness.child_setup(None, ov.nofile_limit()))
    t0 = time.monotonic()
    counter = ov.SyscallCounter(pids()) if args.syscalls and pids else None
    time.sleep(max(0.0, args.warmup - (counter.START_S if counter else 0.0)))
    if counter:
        counter.start()  # takes START_S, started or not
    counting = args.callgrind and target == "llmgate"
    if counting:  # valgrind's pid (the wrapper execs it): count from here on
        subprocess.run(["callgrind_control", "--zero", str(pids()[0])], capture_output=True, check=True)
    cpu0 = ov.cpu_of(pids()) if pids else None
    time.sleep(args.duration / 2)
    loaded = ov.memory_of(pids()) if pids else None
    try:
        procs.check_alive()
    except Exception:
        if counter:
            counter.stop()
        raise
    time.sleep(max(0.0, args.warmup + args.duration - (time.monotonic() - t0)))
    cpu1 = ov.cpu_of(pids()) if pids else None
    syscalls = counter.stop() if counter else None
    if counting:
        subprocess.run(["callgrind_control", "--dump", str(pids()[0])], capture_output=True, check=True)
    rc = lg.wait(timeout=args.drain + 120)
    if rc != 0 or not out.exists():
        raise ov.BenchError(f"llmgate-loadgen exited with {rc} for {target}")
    res = json.loads(out.read_text())
    r: dict = {"target": target, "streams": streams, "loadgen": res}
    events = res.get("window_events", 0)
    r["window_events"] = events
    # Streams still open when the drain ends are cut by the load generator
    # ("unfinished"): by design, not an error of the target.
    kinds = dict(res.get("error_kinds", {}))
    r["unfinished"] = kinds.pop("unfinished", 0)
    r["errors"] = sum(kinds.values())
    r["error_kinds"] = kinds
    r["delay_us"] = res["latency_us"].get("delay", {})
    if pids:
        cpu = ov.cpu_delta(cpu0, cpu1)
        r["cpu_s"] = cpu["s"]
        r["cpu_us_per_event"] = cpu["s"] * 1e6 / events if events else None
        r["rss_idle_mib"] = idle["rss_mib"]
        r["rss_loaded_mib"] = loaded["rss_mib"]
        r["kib_per_stream"] = (loaded["rss_mib"] - idle["rss_mib"]) * 1024 / streams
    if syscalls and events:
        r["syscalls_per_event"] = {k: v / events for k, v in syscalls.items()}
    if counting and events:
        dump, totals = ov.callgrind_last_dump(workdir)  # the window's
        r["instructions_per_event"] = totals / events
        if args.callgrind_out:
            shutil.copy(dump, args.callgrind_out)
    return r


def fmt(v: Optional[float], digits: int = 1) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def report(results: list[dict], args, meta: dict) -> str:
    lines = ["# Trickle benchmark", "",
             f"- command: `{meta['command']}`", f"- date: {meta['date']}", f"- machine: {meta['machine']}",
             f"- revision: {meta['revision']}", f"- nginx: {meta['nginx']}",
             f"- llmgate's GLIBC_TUNABLES: {meta.get('glibc_tunables') or '(unset)'} (the container image's)",
             f"- pinning: proxies (nginx, llmgate with `workers: 1`) on CPU {args.server_cpu}; llmgate-sim and "
             f"llmgate-loadgen on CPU {args.load_cpu}",
             f"- each stream: first token after {args.ttft_ms} ms, then {args.tokens} tokens, one chunked "
             f"SSE event each; closed loop (a connection starts its next stream when one ends), "
             f"{args.ramp:g} s ramp, {args.warmup:g} s warm-up, {args.duration:g} s measured",
             f"- request body: {len(ov.request_body(True, args.history_kib)):,} bytes"
             + (f" (a conversation with about {args.history_kib} KiB of earlier turns)" if args.history_kib
                else " (a short prompt)"), ""]
    for case in sorted({(r["streams"], r["tps"]) for r in results}):
        rows = {r["target"]: r for r in results if (r["streams"], r["tps"]) == case}
        d = rows.get("direct")
        lines += [f"## {case[0]:,} streams at {case[1]:g} tokens/s each", "",
                  "| target | events relayed | CPU s | CPU µs/event | RSS idle → loaded MiB | KiB per stream | "
                  "event delay p50 / p99 µs | added p50 / p99 µs | errors |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for t in TARGETS:
            r = rows.get(t)
            if not r:
                continue
            dl = r["delay_us"]
            added = ("—" if t == "direct" or not d else
                     f"{dl.get('p50', 0) - d['delay_us'].get('p50', 0):+,.0f} / "
                     f"{dl.get('p99', 0) - d['delay_us'].get('p99', 0):+,.0f}")
            lines.append(
                f"| {t} | {r['window_events']:,} | {fmt(r.get('cpu_s'), 2)} | {fmt(r.get('cpu_us_per_event'))} | "
                + (f"{r['rss_idle_mib']:.1f} → {r['rss_loaded_mib']:.1f}" if "rss_idle_mib" in r else "—")
                + f" | {fmt(r.get('kib_per_stream'))} | {fmt(dl.get('p50'), 0)} / {fmt(dl.get('p99'), 0)} | "
                f"{added} | {r['errors']} |")
        counted = [(t, rows[t]["syscalls_per_event"]) for t in TARGETS if rows.get(t, {}).get("syscalls_per_event")]
        if counted:
            lines += ["", "Syscalls per relayed event in the window (`--syscalls`: perf stat on the syscall "
                          f"tracepoints; {ov.SYSCALL_LEGEND}):", ""]
            lines += ov.syscall_table("target", counted)
        n, g = rows.get("nginx"), rows.get("llmgate")
        if g and g.get("instructions_per_event"):
            lines += ["", f"llmgate under callgrind: {g['instructions_per_event']:,.0f} instructions per relayed "
                          "event in the window (user space; its timings and CPU mean nothing)."]
        if n and g and n.get("cpu_us_per_event") and g.get("cpu_us_per_event"):
            lines += ["", f"llmgate / nginx: CPU per event {g['cpu_us_per_event'] / n['cpu_us_per_event']:.2f}×, "
                          f"memory per stream {g['kib_per_stream']:.1f} vs {n['kib_per_stream']:.1f} KiB."]
        lines.append("")
    lines += ["Events relayed: SSE events that reached the load generator inside the measured window. CPU: "
              "the proxy's (all its processes and threads) over that window, from /proc schedstat. Memory: "
              "RSS in the middle of the window minus RSS before the run, over the streams. Event delay: "
              "arrival at the load generator minus the sim's stamp taken as it wrote the event "
              "(CLOCK_MONOTONIC, same host); `added` is against the direct run.", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="1000:20,9000:2",
                    help="STREAMS:TOKENS_PER_S,... (default 1000:20,9000:2)")
    ap.add_argument("--tokens", type=int, default=200, help="tokens per stream (default 200)")
    ap.add_argument("--ttft-ms", type=int, default=100, help="the sim's first-token delay (default 100)")
    ap.add_argument("--ramp", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=15.0, help="seconds before the window (>= ramp)")
    ap.add_argument("--duration", type=float, default=25.0)
    ap.add_argument("--drain", type=float, default=5.0,
                    help="after the window, seconds for streams in flight (they are cut after it: "
                         "nothing after the window is measured)")
    ap.add_argument("--history-kib", type=int, default=0,
                    help="send a conversation with about this many KiB of earlier turns in every request "
                         "(what a chat product or an agent sends; default 0: a short prompt)")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--bin-dir", default=str(REPO / "build" / "bin"))
    ap.add_argument("--nginx", default=None)
    ap.add_argument("--no-install", action="store_true", help="do not apt-get install nginx")
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--load-cpu", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--callgrind", action="store_true",
                    help="run llmgate under callgrind and count its instructions per relayed event in the "
                         "window (deterministic; needs valgrind; use a few hundred streams)")
    ap.add_argument("--callgrind-out", help="keep the window's callgrind dump here (callgrind_annotate)")
    ap.add_argument("--syscalls", action="store_true",
                    help="count each proxy's syscalls per relayed event by kind (perf stat on the syscall "
                         "tracepoints; needs perf and root; they cost a little CPU, so this run's CPU figures "
                         "are not comparable with others)")
    args = ap.parse_args()
    bins = Path(args.bin_dir)
    args.sim, args.loadgen, args.gateway = bins / "llmgate-sim", bins / "llmgate-loadgen", bins / "llmgate"
    signal.signal(signal.SIGTERM, ov._on_signal)
    ov.harness.raise_nofile(ov.NOFILE)
    try:
        cases = parse_cases(args.cases)
        # A proxy holds two descriptors per stream (client and upstream).
        for streams, _ in cases:
            if 2 * streams + 1024 > ov.nofile_limit():
                raise ov.BenchError(f"{streams} streams need {2 * streams + 1024} descriptors per proxy; "
                                    f"RLIMIT_NOFILE allows {ov.nofile_limit()} here")
        targets = [t for t in args.targets.split(",") if t]
        for b in (args.sim, args.loadgen, args.gateway):
            if not os.access(b, os.X_OK):
                raise ov.BenchError(f"{b}: not built (ninja -C build llmgate llmgate-sim llmgate-loadgen)")
        nginx = ov.find_nginx(args.nginx, not args.no_install) if "nginx" in targets else None
        meta = {"command": " ".join(["bench/trickle/run.py"] + sys.argv[1:]),
                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, load average "
                           f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
                "revision": subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                                           capture_output=True, text=True).stdout.strip(),
                "nginx": ov.nginx_version(nginx) if nginx else "not run",
                "glibc_tunables": ov.image_glibc_tunables()}
        results: list[dict] = []
        with tempfile.TemporaryDirectory(prefix="llmgate-trickle-") as tmp:
            workdir = Path(tmp)
            procs = ov.Procs(workdir)
            if args.callgrind:
                args.gateway = ov.callgrind_wrapper(workdir, args.gateway)
            try:
                for streams, tps in cases:
                    label = f"{streams}x{tps:g}"
                    sim, sport, _ = start_sim(procs, args, workdir, tps)
                    ports, pids = {"direct": sport}, {"direct": None}
                    if "nginx" in targets:
                        nport = ov.free_port()
                        # (named "proxy": the generated config's temp paths are proxy-tmp/)
                        px = ov.start_nginx(procs, nginx, "proxy", nginx_conf(workdir, nport, sport, streams),
                                            workdir, {args.server_cpu})
                        ov.wait_until("nginx", lambda: ov.http_request(nport, "GET", "/healthz")[0] == 200, procs)
                        ports["nginx"], pids["nginx"] = nport, (lambda px=px: ov.proc_tree(px.proc.pid))
                    if "llmgate" in targets:
                        lg, lport = ov.start_llmgate(procs, args.gateway, f"llmgate-{label}",
                                                     llmgate_config(sport, streams), workdir, {args.server_cpu},
                                                     "warn")
                        ports["llmgate"], pids["llmgate"] = lport, (lambda lg=lg: [lg.proc.pid])
                    for t in TARGETS:
                        if t not in targets:
                            continue
                        settle(sport, procs)
                        r = run_one(t, ports[t], pids[t], streams, args, workdir, procs, label)
                        r["tps"] = tps
                        results.append(r)
                        ov.log(f"    {r['window_events']:,} events, CPU {fmt(r.get('cpu_us_per_event'))} µs/event, "
                               f"{fmt(r.get('kib_per_stream'))} KiB/stream, delay p50/p99 "
                               f"{fmt(r['delay_us'].get('p50'), 0)}/{fmt(r['delay_us'].get('p99'), 0)} µs, "
                               f"{r['errors']} errors")
                    procs.stop_all()
                    procs = ov.Procs(workdir)
            finally:
                procs.stop_all()
        text = report(results, args, meta)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now().strftime("%Y-%m-%d_%H%M%S")
        (out / f"{stamp}.md").write_text(text)
        (out / f"{stamp}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
        print(text)
        print(f"report: {out / (stamp + '.md')}")
        return ov.EXIT_OK
    except ov.BenchError as e:
        ov.log(str(e))
        return e.code
    except KeyboardInterrupt:
        return ov.EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
