#!/usr/bin/env python3
"""What logging adds to a hook's run time, whatever the daemon does.

    python3 bench/hook_overhead.py --bin target/x86_64-unknown-linux-musl/release/hooklog

Runs one hook command (20,000 lines of 110 bytes from `sh`) alone, then wrapped in
`hooklog hook` against: no daemon (socket missing), a real `hooklog run` read at full speed, a
real `hooklog run` whose stdout is read at 20 KB/s, a listener whose accept queue is full (a
stuck daemon), and a listener that accepts but never reads. Prints one markdown table of wall
times (median of --runs) and checks that every line was reported exactly once by some route.
Python 3.11 standard library only; everything stays in a temporary folder on this machine.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

LINES = 20_000
SCRIPT = (
    f'i=0; while [ $i -lt {LINES} ]; do echo "line $i {"x" * 100}"; i=$((i+1)); done'
)
POD_ENV = {"POD_NAME": "bench", "POD_NAMESPACE": "bench"}


def wall(cmd: list[str], env: dict | None = None) -> tuple[float, int]:
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.monotonic() - t, p.returncode


def count_reported(texts: list[str]) -> int:
    seen = set()
    for text in texts:
        for line in text.splitlines():
            if '"hook.output"' in line and '"line ' in line:
                seen.add(line.split('"line ')[1].split(" ")[0])
    return len(seen)


class Daemon:
    """A real `hooklog run`; stdout read at `rate` bytes/s (None: as fast as it comes)."""

    def __init__(self, bin: str, d: Path, rate: int | None):
        self.sock, self.file = d / "hooklog.sock", d / "prestop.log"
        self.p = subprocess.Popen(
            [bin, "run", "--file", str(self.file), "--socket", str(self.sock), "--grace", "60s",
             "--linger", "100ms"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, **POD_ENV})
        self.out = bytearray()
        self.rate = rate
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        while not self.sock.exists():
            time.sleep(0.01)

    def _read(self):
        chunk = 4096 if self.rate else 1 << 20
        while True:
            b = self.p.stdout.read1(chunk)
            if not b:
                return
            self.out += b
            if self.rate:
                time.sleep(len(b) / self.rate)

    def stop(self) -> str:
        self.rate = None
        self.p.terminate()
        self.p.wait()
        self.t.join()
        return self.out.decode(errors="replace")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    rows = []
    alone = statistics.median(wall(["sh", "-c", SCRIPT])[0] for _ in range(a.runs))
    rows.append(("the command alone", alone, LINES, "-"))

    def hook(d: Path) -> list[str]:
        return [a.bin, "hook", "--container", "bench", "--socket", str(d / "hooklog.sock"),
                "--file", str(d / "prestop.log"), "--", "sh", "-c", SCRIPT]

    def scenario(name: str, setup, teardown):
        times, reported, codes = [], [], []
        for _ in range(a.runs):
            with tempfile.TemporaryDirectory() as td:
                d = Path(td)
                state = setup(d)
                t, rc = wall(hook(d))
                texts = teardown(d, state)
                times.append(t)
                codes.append(rc)
                reported.append(count_reported(texts + [(d / "prestop.log").read_text()
                                                       if (d / "prestop.log").exists() else ""]))
        rows.append((name, statistics.median(times), min(reported), ",".join(map(str, set(codes)))))

    scenario("no daemon (socket missing)", lambda d: None, lambda d, s: [])
    scenario("hooklog run, stdout read at full speed",
             lambda d: Daemon(a.bin, d, None), lambda d, s: [s.stop()])
    scenario("hooklog run, stdout read at 20 KB/s",
             lambda d: Daemon(a.bin, d, 20_000), lambda d, s: [s.stop()])

    def stuck(d: Path):
        ls = socket.socket(socket.AF_UNIX)
        ls.bind(str(d / "hooklog.sock"))
        ls.listen(1)
        held = []
        while True:
            c = socket.socket(socket.AF_UNIX)
            c.setblocking(False)
            try:
                c.connect(str(d / "hooklog.sock"))
                held.append(c)
            except BlockingIOError:
                break
        return ls, held

    scenario("stuck daemon (accept queue full)", stuck, lambda d, s: [])

    def deaf(d: Path):
        ls = socket.socket(socket.AF_UNIX)
        ls.bind(str(d / "hooklog.sock"))
        ls.listen(64)
        conns = []
        stop = threading.Event()

        def accept():
            ls.settimeout(0.05)
            while not stop.is_set():
                try:
                    conns.append(ls.accept()[0])
                except OSError:
                    pass
        th = threading.Thread(target=accept, daemon=True)
        th.start()
        return ls, conns, stop, th

    def deaf_end(d: Path, s) -> list[str]:
        ls, conns, stop, th = s
        stop.set()
        th.join()
        got = b""
        for c in conns:
            c.setblocking(False)
            try:
                while True:
                    b = c.recv(1 << 20)
                    if not b:
                        break
                    got += b
            except BlockingIOError:
                pass
        return [got.decode(errors="replace")]

    scenario("daemon that accepts but never reads", deaf, deaf_end)

    print(f"| daemon | hook wall time (median of {a.runs}) | added | lines reported (of {LINES}) | exit |")
    print("|---|---|---|---|---|")
    for name, t, rep, code in rows:
        added = "-" if name == "the command alone" else f"+{t - alone:.2f} s"
        print(f"| {name} | {t:.2f} s | {added} | {rep} | {code} |")
    bad = [r for r in rows if r[2] != LINES]
    if bad:
        print("lines lost:", bad, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
