#!/usr/bin/env python3
"""The manifest wing's cost on large inputs (issue 24 §4): inject, uninject and check.

    python3 bench/manifest.py                      # 1, 10 and 100 MB; builds cargo build --release
    python3 bench/manifest.py --sizes 1,10 --bin target/release/hooklog
    python3 bench/manifest.py --sizes 1 --list --bin BIN    # one kind: List of 1 MB
    python3 bench/manifest.py --sizes 1,4 --json --bin BIN  # that List as one line of JSON

Generates a file of Deployments with bench/gen_manifests.py (each with two containers, a preStop
hook, env, labels and annotations: about 725 bytes; issue 24's 10 MB file of 18,224
Deployments; tests/cost.rs measures the same input), or with `--list` one `kind: List` document
of them, then runs the release binary on it: `inject --offline --image ... -` on the file,
`uninject -` and `check --offline -` on inject's output. Each run's wall time, CPU time (also
per MB of what it reads: flat when the time is linear) and peak RSS (wait4's ru_maxrss) go into
one markdown table, with RSS as a multiple of the input's size. Writes it to bench/out/manifest.md.

Python 3.11 standard library only; installs nothing; nothing leaves this machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_manifests import generate_file  # noqa: E402  (beside this file)

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024
IMAGE = "registry.example.com/hooklog:0.1.0"

def measure(args: list[str], stdin: Path, stdout: Path, cap: int) -> tuple[float, float, int, int]:
    """Runs args with stdin from a file and stdout to a file, its address space capped at `cap`
    bytes (a run past it aborts instead of taking the machine's memory): wall seconds, CPU
    seconds (user and system: what a shared machine's load does not inflate), peak RSS in
    bytes and the exit code."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    # stderr (one line per object) to a file: a pipe nobody reads would fill and block it.
    with stdin.open("rb") as i, stdout.open("wb") as o, tempfile.TemporaryFile() as e:
        start = time.monotonic()
        p = subprocess.Popen(args, stdin=i, stdout=o, stderr=e, preexec_fn=limit)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        e.seek(0)
        err = e.read().decode(errors="replace")
        if p.returncode not in (0, 1):
            sys.stderr.write(f"{' '.join(args)}: exit {p.returncode}: {err[-500:]}\n")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,10,100", help="input sizes in MB (default 1,10,100)")
    ap.add_argument("--bin", type=Path, default=None, help="hooklog binary (default: cargo build --release)")
    ap.add_argument("--list", action="store_true", help="one kind: List document, not a stream")
    ap.add_argument("--json", action="store_true", help="one kind: List as one line of JSON")
    ap.add_argument("--cap-gb", type=float, default=8.0, help="address-space cap per run (default 8 GB)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out", help="where manifest.md goes")
    a = ap.parse_args()
    binary = a.bin
    if binary is None:
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
        binary = ROOT / "target" / "release" / "hooklog"
    env_bin = str(binary.resolve())
    shape = "one kind: List, one line of JSON," if a.json else "one kind: List" if a.list else "a stream"
    rows = [f"{shape} of Deployments", "",
            "| input | Deployments | command | wall s | CPU s | CPU s / MB | peak RSS MB | RSS / input | exit |",
            "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for mb in [int(s) for s in a.sizes.split(",")]:
            src, injected, back = d / "in.yaml", d / "injected.yaml", d / "back.yaml"
            n = generate_file(src, mb * MB, a.list, a.json)
            size = src.stat().st_size
            for name, args, i, o in [
                ("inject", [env_bin, "inject", "--offline", "--image", IMAGE, "-"], src, injected),
                ("uninject", [env_bin, "uninject", "-"], injected, back),
                ("check --offline", [env_bin, "check", "--offline", "-"], injected, d / "report.txt"),
            ]:
                wall, cpu, rss, code = measure(args, i, o, int(a.cap_gb * 1024 * MB))
                read = i.stat().st_size
                rows.append(f"| {mb} MB | {n:,} | {name} | {wall:.2f} | {cpu:.2f} | {cpu / (read / MB):.3f} "
                            f"| {rss / MB:.0f} | {rss / size:.1f}x | {code} |")
                print(rows[-1], flush=True)
            same = src.read_bytes() == back.read_bytes()
            print(f"{mb} MB: uninject(inject(x)) == x: {same}", flush=True)
    table = "\n".join(rows) + "\n"
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "manifest.md").write_text(f"binary: {binary}\n\n{table}")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
