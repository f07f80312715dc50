"""Run by the zygote tests as a forked "runner": reports how it was started, then exits 7.

Prints one JSON line: its ``sys.argv``, an environment variable, its working
directory, its command line as ``/proc`` shows it, its parent's pid, its
threads and a line read from standard input. With ``sleep`` as its first
argument it sleeps instead of exiting (to be killed).
"""

from __future__ import annotations

import json
import os
import sys
import time

if __name__ == "__main__":
    if sys.argv[1:2] == ["sleep"]:
        print(json.dumps({"pid": os.getpid()}), flush=True)
        time.sleep(120)
    report = {
        "argv": sys.argv,
        "env": os.environ.get("ZYGOTE_PROBE"),
        "cwd": os.getcwd(),
        "cmdline": open("/proc/self/cmdline", "rb").read().rstrip(b"\0").split(b"\0"),
        "ppid": os.getppid(),
        "stdin": sys.stdin.readline().strip(),
    }
    report["cmdline"] = [part.decode() for part in report["cmdline"]]
    print(json.dumps(report), flush=True)
    sys.exit(7)
