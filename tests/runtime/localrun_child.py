"""Child process for crash tests: run functions with FunctionRun until their input is drained.

Usage: python localrun_child.py SPEC.json

``SPEC.json`` holds ``store_url``, ``data_dir``, ``master`` and ``functions``:
a list of :class:`FunctionConfig` field dicts. All functions run at once on
one SparkSession (one JVM), each with its own checkpoint under the data
directory, so a restart on the same spec continues where the last run
stopped. Prints ``<seconds> <name> batch <id>`` as batches complete and ``done`` at
the end; the parent kills the process group (with the JVM) when it wants.
With ``"group": true`` the functions are members of one query group instead
(:mod:`sparkfn.runtime.group`), as a worker runs them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.group.run import QueryGroup
from sparkfn.runtime.spark.session import spark_session
from sparkfn.store.store import Store


def main() -> None:
    began = time.monotonic()
    spec = json.loads(Path(sys.argv[1]).read_text())
    store = Store.open(spec["store_url"], spec["data_dir"])
    spark = spark_session(master=spec.get("master", "local[2]"), app_name="localrun-child")
    group = QueryGroup(spark, store, "child") if spec.get("group") else None
    runs = [
        FunctionRun(FunctionConfig.build(**fields), store=store, spark=spark, group=group)
        for fields in spec["functions"]
    ]
    for run in runs:
        run.start(until_drained=True)
    print(f"{time.monotonic() - began:.1f}s started", flush=True)
    if group is not None:
        for run in runs:
            run.wait()  # raises if the function failed
        print(
            f"{time.monotonic() - began:.1f}s drained, group batches {group.batches()}", flush=True
        )
        group.close()
        print(f"{time.monotonic() - began:.1f}s done", flush=True)
        store.close()
        return
    reported: dict[str, int] = {}
    while any(run.query.isActive for run in runs):
        time.sleep(0.2)
        for run in runs:
            progress = run.query.lastProgress
            if progress and reported.get(run.config.name) != progress["batchId"]:
                reported[run.config.name] = progress["batchId"]
                print(
                    f"{time.monotonic() - began:.1f}s {run.config.name} batch {progress['batchId']}",
                    flush=True,
                )
    for run in runs:
        run.wait()  # raises if the function failed
    print(f"{time.monotonic() - began:.1f}s done", flush=True)
    store.close()


if __name__ == "__main__":
    main()
