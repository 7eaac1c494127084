#!/usr/bin/env python3
"""Runs a command and reports its peak RSS, as the kernel counts it: wait4's ru_maxrss.

    python3 tests/support/maxrss.py OUT -- COMMAND [ARGS...]

COMMAND inherits stdin, stdout and stderr; once it exits, its peak RSS in bytes is written to
the file OUT and this exits with COMMAND's exit code (128 + N for a signal N). A peak read from
/proc/PID/status while a process runs misses what it reaches in its last moments (a refusal
right after a large read); wait4 does not (tests/cost.rs). Python 3 standard library only.
"""

import os
import subprocess
import sys


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.stderr.write(__doc__)
        return 64
    out, command = sys.argv[1], sys.argv[3:]
    child = subprocess.Popen(command)
    _, status, usage = os.wait4(child.pid, 0)
    with open(out, "w") as f:
        f.write(f"{usage.ru_maxrss * 1024}\n")
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
