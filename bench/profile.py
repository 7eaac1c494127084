#!/usr/bin/env python3
"""Where the sidecar spends its work on bench/run.py's file job: the top of a profile.

    python3 bench/profile.py                     # the static musl sidecar, 200,000 lines
    python3 bench/profile.py --target gnu        # the glibc build, for the side by side
    python3 bench/profile.py --bin PATH --lines 50000 --top 30

Builds the sidecar with its symbols (`cargo build --profile profiling --no-default-features`,
Cargo.toml's `profiling` profile: release with `strip = false` and line tables; `--target musl`,
the default, adds `--target x86_64-unknown-linux-musl`, the build the image ships), writes
bench/run.py's workload (JSON lines of about 170 bytes, the same POD_* env and podinfo folder),
runs `hooklog run --file` on it with stdout to a file until every line is out, sends SIGTERM and
prints the top functions by instructions (self cost), the instructions per line, and the calls
per line of the functions named by --calls (`memcpy,memmove` by default): the small copies musl's
`memcpy` used to pay for (issue 42).

The profiler: `perf record` when this machine counts instructions (`perf stat -e instructions
true` counts), else valgrind's callgrind (`apt-get install valgrind`), whose instruction counts
are the same from run to run whatever else the machine does, so two builds compare to the
instruction. Instructions include the start-up and shutdown (about 1.3 M instructions, about 6
a line at 200,000 lines). Python 3.11 standard library only; files stay in a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/run.py: the workload and the pod's environment)

ROOT = bench.ROOT
TRIPLES = {"musl": "x86_64-unknown-linux-musl", "gnu": None}
# Under callgrind hooklog runs about 50 times slower: the deadline for all lines to be out.
LINES_PER_S_UNDER_VALGRIND = 5_000


def log(msg: str) -> None:
    print(f"profile: {msg}", file=sys.stderr, flush=True)


def build(target: str) -> Path:
    argv = ["cargo", "build", "--profile", "profiling", "--locked", "--no-default-features"]
    triple = TRIPLES[target]
    if triple:
        argv += ["--target", triple]
    log(" ".join(argv))
    subprocess.run(argv, cwd=ROOT, check=True)
    target_dir = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target_dir / (triple or "") / "profiling" / "hooklog"


def perf_counts_instructions() -> bool:
    if shutil.which("perf") is None:
        return False
    r = subprocess.run(["perf", "stat", "-x,", "-e", "instructions", "true"], capture_output=True, text=True)
    return r.returncode == 0 and "not supported" not in r.stderr and "<not counted>" not in r.stderr


def run_job(argv_prefix: list[str], hooklog: Path, work: Path, lines: int, env: dict, out: Path) -> None:
    """Runs the file job under argv_prefix until `lines` records are on stdout, then SIGTERM."""
    with open(out, "wb") as stdout, open(out.with_suffix(".stderr"), "wb") as stderr:
        p = subprocess.Popen(argv_prefix + [str(hooklog), "run", "--file", str(work)], stdout=stdout, stderr=stderr, env=env)
    deadline = time.monotonic() + 30 + lines / LINES_PER_S_UNDER_VALGRIND
    seen, pos = 0, 0
    try:
        with open(out, "rb") as f:
            while seen < lines:
                if p.poll() is not None:
                    raise RuntimeError(f"hooklog exited ({p.returncode}) after {seen} of {lines} lines")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {seen} of {lines} lines within the deadline")
                f.seek(pos)
                chunk = f.read()
                pos += len(chunk)
                seen += chunk.count(b"\n")
                if seen < lines:
                    time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def symbol_names(binary: Path) -> dict[str, str]:
    """Names of the binary's symbols by address (`0x...` as callgrind writes it): callgrind names
    a function by its address when its symbol has no size, as musl's assembly `memcpy` has."""
    if shutil.which("nm") is None:
        return {}
    out = subprocess.run(["nm", str(binary)], capture_output=True, text=True).stdout
    names: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "Tt":
            key = f"0x{int(parts[0], 16):016x}"
            # The C name (memcpy), not an alias (__memcpy_fwd), when there are two.
            if key not in names or names[key].startswith("_"):
                names[key] = parts[2]
    return names


def read_callgrind(path: Path, names: dict[str, str]) -> tuple[int, dict[str, int], dict[str, int]]:
    """(total instructions, self instructions by function, calls by callee) from a callgrind
    output file. A function inlined into another counts in the one it was inlined into."""
    ids: dict[str, str] = {}
    self_cost: dict[str, int] = defaultdict(int)
    calls: dict[str, int] = defaultdict(int)
    fn = "?"
    in_call = False
    total = 0
    name_re = re.compile(r"^(c?fn)=\((\d+)\)(?: (.*))?$")
    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                if in_call:
                    in_call = False  # the call's inclusive cost: not this function's own
                    continue
                parts = line.split()
                if len(parts) > 1:
                    n = int(parts[1])
                    self_cost[fn] += n
                    total += n
            elif line.startswith(("fn=", "cfn=")):
                m = name_re.match(line.rstrip("\n"))
                if m:
                    kind, fid, name = m.groups()
                    if name is not None:
                        ids[fid] = names.get(name, name)
                    if kind == "fn":
                        fn = ids.get(fid, fid)
                    else:
                        callee = ids.get(fid, fid)
            elif line.startswith("calls="):
                calls[callee] += int(line.split("=", 1)[1].split()[0])
                in_call = True
    return total, self_cost, calls


def profile_callgrind(hooklog: Path, work: Path, lines: int, env: dict, tmp: Path, top: int, counted: list[str]) -> None:
    cg = tmp / "callgrind.out"
    run_job(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}"], hooklog, work, lines, env, tmp / "out.json")
    total, self_cost, calls = read_callgrind(cg, symbol_names(hooklog))
    print(f"{hooklog}: {lines:,} lines, {total:,} instructions, {total / lines:,.0f} per line (callgrind)")
    for name in counted:
        n = calls.get(name, 0)
        print(f"calls to {name}: {n:,}, {n / lines:.1f} per line; its own instructions {self_cost.get(name, 0) / lines:,.1f} per line")
    print()
    print(f"{'instructions':>14} {'share':>6} {'per line':>9}  function (self cost)")
    for name, n in sorted(self_cost.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{n:>14,} {n / total * 100:>5.1f}% {n / lines:>9.1f}  {name}")
    print(f"\nthe whole profile: callgrind_annotate {cg} (run with --keep: the folder is removed otherwise)")


def profile_perf(hooklog: Path, work: Path, lines: int, env: dict, tmp: Path, top: int) -> None:
    data = tmp / "perf.data"
    run_job(["perf", "record", "-e", "instructions", "-o", str(data), "--"], hooklog, work, lines, env, tmp / "out.json")
    rep = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "symbol", "--percent-limit", "0.5"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    shown = [line for line in rep.splitlines() if line.strip() and not line.startswith("#")]
    print(f"{hooklog}: {lines:,} lines (perf record -e instructions)")
    print("\n".join(shown[:top]))
    print(f"\nthe whole profile: perf report -i {data} (run with --keep: the folder is removed otherwise)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", choices=sorted(TRIPLES), default="musl", help="musl (static, the shipped build; default) or gnu (glibc)")
    ap.add_argument("--bin", type=Path, default=None, help="profile this binary (built with symbols) instead of building")
    ap.add_argument("--lines", type=int, default=200_000, help="lines in the workload (default 200,000)")
    ap.add_argument("--top", type=int, default=25, help="functions shown (default 25)")
    ap.add_argument("--tool", choices=["auto", "perf", "callgrind"], default="auto", help="profiler (default: perf when it counts instructions here, else callgrind)")
    ap.add_argument("--calls", default="memcpy,memmove", help="functions whose calls per line are counted (callgrind)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder with the profile")
    args = ap.parse_args()

    hooklog = args.bin or build(args.target)
    if not hooklog.is_file():
        log(f"no hooklog binary at {hooklog}")
        return 2
    tool = args.tool
    if tool == "auto":
        tool = "perf" if perf_counts_instructions() else "callgrind"
        log(f"profiler: {tool}" + ("" if tool == "perf" else " (perf does not count instructions here)"))
    if tool == "callgrind" and shutil.which("valgrind") is None:
        log("valgrind is missing: apt-get install valgrind")
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="hooklog-profile-"))
    try:
        work = tmp / "work" / "prestop.log"
        work.parent.mkdir()
        size = bench.write_workload(work, args.lines)
        log(f"workload: {args.lines:,} lines, {size / args.lines:.0f} bytes each")
        podinfo = tmp / "podinfo"
        podinfo.mkdir()
        (podinfo / "labels").write_text(bench.LABELS)
        (podinfo / "annotations").write_text(bench.ANNOTATIONS)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLOG_")}
        env.update(bench.POD_ENV)
        env["HOOKLOG_PODINFO"] = str(podinfo)
        env["RUST_LOG"] = "warn"
        if tool == "perf":
            profile_perf(hooklog, work, args.lines, env, tmp, args.top)
        else:
            profile_callgrind(hooklog, work, args.lines, env, tmp, args.top, args.calls.split(","))
    finally:
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
