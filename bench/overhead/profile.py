#!/usr/bin/env python3
"""Profile llmgate's per-request cost on the overhead benchmark's static upstream.

Starts the same upstream nginx and llmgate as `run.py` (same config, same
pinning: load generator on one CPU, servers on the other), drives one closed
loop of non-streamed or streamed requests with llmgate-loadgen, and prints

  * the request rate and llmgate's CPU time per request over the window, and
  * with --perf, a `perf record -g` profile of llmgate taken in the middle of
    the window, in the format of profiles/*.txt (dso shares, then symbols).

  * with --callgrind, llmgate's user-space instructions per request, counted
    by valgrind's callgrind over the window (deterministic where CPU time on
    a shared virtual machine varies by tens of percent between runs; the
    kernel's share is not in it), and the functions that execute them.

It is the quick loop for per-request work (`run.py` is the report):

  python3 bench/overhead/profile.py --kind nonstream
  python3 bench/overhead/profile.py --kind stream --perf --out bench/overhead/profiles/after.stream.txt
  python3 bench/overhead/profile.py --kind nonstream --callgrind --connections 8 --duration 20
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as ov  # noqa: E402  (the overhead benchmark's setup)


def callgrind_self_costs(dump: Path) -> tuple[int, list[tuple[int, str]]]:
    """(total instructions, [(self instructions, function)] most first) of a callgrind dump.

    Self cost: the cost lines under each fn=, without the inclusive cost
    lines that follow a calls= line (those are the callee's)."""
    names: dict[str, str] = {}
    self_cost: dict[str, int] = {}
    current = ""
    callee_line = False

    def name(spec: str) -> str:
        # "(12) name" defines id 12; "(12)" refers to it (name compression).
        if spec.startswith("("):
            ident, _, rest = spec[1:].partition(")")
            if rest.strip():
                names[ident] = rest.strip()
            return names.get(ident, ident)
        return spec

    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith("fn="):
            current = name(line[3:])
        elif line.startswith("cfn="):
            name(line[4:])
        elif line.startswith("calls="):
            callee_line = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            fields = line.split()
            if callee_line:
                callee_line = False
            elif len(fields) >= 2 and current:
                self_cost[current] = self_cost.get(current, 0) + int(fields[1])
    total = sum(self_cost.values())
    return total, sorted(((v, k) for k, v in self_cost.items()), reverse=True)


def workload_flags(args) -> str:
    """The options that change what each request is, for a profile's header."""
    return ((f" --history-kib {args.history_kib:g}" if args.history_kib else "")
            + (" --sdk-head" if args.sdk_head else "")
            + (f" --api {args.api}" if args.api != "chat" else "")
            + (f" --upstream {args.upstream}" if args.upstream != "openai" else ""))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kind", choices=ov.KINDS, default="nonstream")
    p.add_argument("--duration", type=float, default=6.0, help="measured seconds (default 6)")
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--history-kib", type=int, default=0, help="earlier turns in each body, KiB")
    p.add_argument("--api", choices=("chat", "messages"), default="chat",
                   help="the client API: chat completions, or Anthropic's Messages API (a coding agent's "
                        "request, translated to chat for the OpenAI-shaped upstream)")
    p.add_argument("--upstream", choices=("openai", "anthropic", "gemini", "bedrock"), default="openai",
                   help="the static upstream's protocol: OpenAI's chunks, Anthropic's Messages events "
                        "(the deployment a coding agent's request goes to as it came), Gemini's "
                        "streamGenerateContent responses, or Bedrock's ConverseStream messages")
    p.add_argument("--sdk-head", action="store_true",
                   help="send the OpenAI SDK's request head (fifteen fields) instead of three")
    p.add_argument("--perf", action="store_true", help="record a perf profile of llmgate in the window")
    p.add_argument("--out", help="write the profile here (default: stdout)")
    p.add_argument("--bin-dir", default=str(ov.REPO / "build" / "bin"))
    p.add_argument("--loadgen-cpu", type=int, default=0)
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--label", default="", help="names the profile in its header")
    p.add_argument("--call-graph", default="", help="perf record --call-graph MODE (e.g. dwarf); default -g")
    p.add_argument("--perf-data", help="keep perf.data here (for perf report -g caller)")
    p.add_argument("--callgrind", action="store_true",
                   help="run llmgate under valgrind's callgrind: instructions per request in the window")
    p.add_argument("--callgrind-out", help="keep the callgrind dump here (for callgrind_annotate)")
    args = p.parse_args(argv)
    bin_dir = Path(args.bin_dir)
    args.gateway = (bin_dir / "llmgate").resolve()
    args.loadgen = (bin_dir / "llmgate-loadgen").resolve()
    args.nginx = ov.find_nginx(None, True)
    args.llmgate_workers, args.llmgate_pool, args.llmgate_log_level = 1, 1024, "warn"
    try:
        os.sched_setaffinity(0, {args.loadgen_cpu})
    except OSError:
        pass

    workdir = Path(tempfile.mkdtemp(prefix="llmgate-profile-"))
    os.chmod(workdir, 0o755)
    body = workdir / "body.json"
    make_body = ov.messages_request_body if args.api == "messages" else ov.request_body
    body.write_bytes(make_body(args.kind == "stream", args.history_kib))
    path = ov.MESSAGES_PATH if args.api == "messages" else ov.PATH
    procs = ov.Procs(workdir)
    if args.callgrind:
        args.gateway = ov.callgrind_wrapper(workdir, args.gateway)
    try:
        g = ov.setup_static(procs, args, workdir)
        ov.verify_target(g.llmgate_port, args.kind, "llmgate", args.api)
        pid = g.pids["llmgate"]()[0]
        out_json = workdir / "loadgen.json"
        argv_lg = [str(args.loadgen), "--url", f"http://{ov.HOST}:{g.llmgate_port}{path}", "--body-file",
                   str(body), *ov.head_flags(args.sdk_head),
                   "--connections", str(args.connections), "--duration", f"{args.duration:g}",
                   "--warmup", "1", "--cpu", str(args.loadgen_cpu), "--json", str(out_json)]
        if args.callgrind:  # count from here on
            subprocess.run(["callgrind_control", "--zero", str(pid)], capture_output=True, check=True)
        c0 = g.counters()
        cpu0 = ov.cpu_of([pid])
        lg = subprocess.Popen(argv_lg, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        perf_data = workdir / "perf.data"
        if args.perf:
            time.sleep(1 + args.duration / 4)
            window = max(1.0, args.duration / 2)
            subprocess.run(["perf", "record", "-F", "1999",
                            *(["--call-graph", args.call_graph] if args.call_graph else ["-g"]), "-o", str(perf_data), "-p", str(pid), "--",
                            "sleep", f"{window:g}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, err = lg.communicate(timeout=args.duration + 120)
        cpu1 = ov.cpu_of([pid])
        c1 = g.counters()
        if args.callgrind:
            subprocess.run(["callgrind_control", "--dump", str(pid)], capture_output=True, check=True)
        res = json.loads(out_json.read_text())
        requests = c1[1] - c0[1]
        cpu_s = ov.cpu_delta(cpu0, cpu1)["s"]
        rss = ov.memory_of([pid])["rss_mib"]
        summary = (f"{args.kind}: {res['rate']:,.0f} req/s, {res['errors']} errors, llmgate "
                   f"{1e6 * cpu_s / max(1, requests):.1f} us CPU per request ({requests} upstream requests), "
                   f"RSS {rss:.1f} MiB")
        print(summary, flush=True)
        if args.callgrind:
            dump, totals = ov.callgrind_last_dump(workdir)
            line = (f"callgrind: {totals / max(1, requests):,.0f} instructions per request in llmgate "
                    f"(user space; {requests} requests)")
            print(line, flush=True)
            if args.callgrind_out:
                shutil.copy(dump, args.callgrind_out)
            if args.out:  # the functions that execute them, by self instructions per request
                total, fns = callgrind_self_costs(dump)
                n = max(1, requests)
                rows = [f"{v / n:10,.0f} {100 * v / max(1, total):5.1f}%  {f[:150]}" for v, f in fns[:60]]
                head = [f"# callgrind self instructions per request, llmgate ({args.label or args.kind}), closed "
                        f"loop {args.connections} connections, static nginx upstream, "
                        f"{dt.date.today().isoformat()}, {ov.git_info()}",
                        f"# python3 bench/overhead/profile.py --kind {args.kind} --callgrind "
                        f"--connections {args.connections} --duration {args.duration:g}"
                        + workload_flags(args),
                        f"# {summary}", f"# {line}"]
                Path(args.out).write_text("\n".join(head + rows) + "\n")
                print(f"profile: {args.out}")
        if args.perf:
            head = [f"# perf top symbols, llmgate ({args.label or args.kind}), closed loop {args.connections} "
                    f"connections, static nginx upstream, {dt.date.today().isoformat()}, {ov.git_info()}",
                    f"# python3 bench/overhead/profile.py --kind {args.kind} --perf"
                    + workload_flags(args)
                    + " (perf record -F 1999 -g; perf report --no-children)",
                    f"# {summary}"]
            dso = subprocess.run(["perf", "report", "-i", str(perf_data), "--no-children", "--sort", "dso",
                                  "--stdio", "-g", "none"], capture_output=True, text=True).stdout
            sym = subprocess.run(["perf", "report", "-i", str(perf_data), "--no-children", "--sort", "sym",
                                  "--stdio", "-g", "none"], capture_output=True, text=True).stdout
            keep = lambda t, n: [l[:160].rstrip() for l in t.splitlines() if l.strip() and not l.startswith("#")][:n]
            text = "\n".join(head + keep(dso, 6) + [""] + keep(sym, 60)) + "\n"
            if args.perf_data:
                shutil.copy(perf_data, args.perf_data)
            if args.out:
                Path(args.out).write_text(text)
                print(f"profile: {args.out}")
            else:
                print(text)
        return 0
    finally:
        procs.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ov.BenchError as e:
        ov.log(f"error: {e}")
        sys.exit(e.code if hasattr(e, "code") else 3)
