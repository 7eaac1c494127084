#!/usr/bin/env python3
"""The manifest wing's cost on large inputs (issue 24 §4): inject, uninject and check.

    python3 bench/manifest.py                      # 1, 10 and 100 MB; builds cargo build --release
    python3 bench/manifest.py --sizes 1,10 --bin target/release/hooklog

Generates a file of Deployments (each with two containers, a preStop hook, env, labels and
annotations: about 725 bytes; issue 24's 10 MB file of 18,224 Deployments), then runs the
release binary on it: `inject --image ... -` on the file, `uninject -` and `check --offline -`
on inject's output. Each run's wall time and peak RSS (wait4's ru_maxrss) go into one markdown
table, with RSS as a multiple of the input's size. Writes it to bench/out/manifest.md.

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

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024
IMAGE = "registry.example.com/hooklog:0.1.0"

DEPLOYMENT = """\
---
# deployment {n}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-{n}
  labels: {{app: app-{n}, tier: "web"}}
  annotations:
    example.com/owner: 'team {m}'
spec:
  replicas: 3
  selector:
    matchLabels:
      app: app-{n}
  template:
    metadata:
      labels:
        app: app-{n}
    spec:
      terminationGracePeriodSeconds: 60
      containers:
      - name: web
        image: nginx:1.25
        ports: [{{containerPort: 80}}]
        env:
        - {{name: MODE, value: "production"}}
        lifecycle:
          preStop:
            exec:
              command: ["sh", "-c", "nginx -s quit; sleep 5"]
      - name: log
        image: busybox:1.36
        args: [sh, -c, 'tail -F /var/log/app.log']
"""


def generate(path: Path, size: int) -> int:
    """Writes Deployments until the file holds `size` bytes; returns how many."""
    n = 0
    written = 0
    with path.open("w") as f:
        while written < size:
            doc = DEPLOYMENT.format(n=n, m=n % 7)
            f.write(doc)
            written += len(doc)
            n += 1
    return n


def measure(args: list[str], stdin: Path, stdout: Path, cap: int) -> tuple[float, int, int]:
    """Runs args with stdin from a file and stdout to a file, its address space capped at `cap`
    bytes (a run past it aborts instead of taking the machine's memory): wall seconds, peak
    RSS in bytes and the exit code."""

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
    return wall, usage.ru_maxrss * 1024, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,10,100", help="input sizes in MB (default 1,10,100)")
    ap.add_argument("--bin", type=Path, default=None, help="hooklog binary (default: cargo build --release)")
    ap.add_argument("--cap-gb", type=float, default=8.0, help="address-space cap per run (default 8 GB)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out", help="where manifest.md goes")
    a = ap.parse_args()
    binary = a.bin
    if binary is None:
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
        binary = ROOT / "target" / "release" / "hooklog"
    env_bin = str(binary.resolve())
    rows = ["| input | Deployments | command | wall s | peak RSS MB | RSS / input | exit |",
            "| ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for mb in [int(s) for s in a.sizes.split(",")]:
            src, injected, back = d / "in.yaml", d / "injected.yaml", d / "back.yaml"
            n = generate(src, mb * MB)
            size = src.stat().st_size
            for name, args, i, o in [
                ("inject", [env_bin, "inject", "--image", IMAGE, "-"], src, injected),
                ("uninject", [env_bin, "uninject", "-"], injected, back),
                ("check --offline", [env_bin, "check", "--offline", "-"], injected, d / "report.txt"),
            ]:
                wall, rss, code = measure(args, i, o, int(a.cap_gb * 1024 * MB))
                rows.append(f"| {mb} MB | {n:,} | {name} | {wall:.2f} | {rss / MB:.0f} | {rss / size:.1f}x | {code} |")
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
