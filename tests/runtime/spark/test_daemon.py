"""Cheaper Python workers: sparkfn's daemon and a SPARK_HOME without pyspark.zip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from test_zygote import _argv, _descendants

from sparkfn.runtime.spark.daemon import PRELOAD
from sparkfn.runtime.spark.session import WARM_UP_GROUP, spark_home_without_zip, warm_up


def test_the_preloaded_modules_start_no_thread() -> None:
    # fork() copies only the forking thread: a preloaded module that started
    # one could leave its locks held in every worker.
    code = (
        "import json, os, sys\n"
        "from sparkfn.runtime.spark.daemon import preload\n"
        "preload()\n"
        "print(json.dumps({'threads': len(os.listdir('/proc/self/task')),"
        " 'modules': sorted(sys.modules)}))\n"
    )
    done = _python(code)
    assert done.stderr == ""  # every module imported
    found = json.loads(done.stdout)
    assert found["threads"] == 1
    assert set(PRELOAD) <= set(found["modules"])
    assert not {"numpy", "pyarrow", "pandas"} & set(found["modules"])


def test_spark_home_without_the_zip_is_made_once_and_reused(tmp_path: Path) -> None:
    home = spark_home_without_zip(tmp_path)
    assert home is not None and home.parent == tmp_path
    assert (home / "jars").is_dir() and (home / "bin" / "spark-submit").exists()
    lib = home / "python" / "lib"
    assert not (lib / "pyspark.zip").exists()
    assert any(entry.name.startswith("py4j") for entry in lib.iterdir())
    assert spark_home_without_zip(tmp_path) == home
    assert [p.name for p in tmp_path.iterdir()] == [home.name]  # no half-built copies left


def test_workers_fork_from_sparkfns_daemon_and_import_pyspark_unzipped(spark: Any) -> None:
    def describe(_: Any) -> dict[str, Any]:
        import gc
        import sys

        import pyspark

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
            parent = cmdline.read().replace(b"\0", b" ").decode()
        return {
            "parent": parent,
            # Spark names the zip on the path whether or not it is there.
            "zip_on_path": any(p.endswith("pyspark.zip") and os.path.exists(p) for p in sys.path),
            "pyspark_from": pyspark.__file__,
            "preloaded": "sparkfn.store.store" in sys.modules,
            # pyspark collects garbage after every task: the daemon's objects are skipped.
            "frozen": gc.get_freeze_count(),
        }

    [seen] = spark.sparkContext.parallelize([0], 1).map(describe).collect()
    assert "-m sparkfn.runtime.spark.daemon" in seen["parent"], seen
    assert seen["preloaded"] and not seen["zip_on_path"], seen
    assert ".zip" not in seen["pyspark_from"], seen
    assert seen["frozen"] > 50_000, seen["frozen"]


def test_the_warm_up_runs_a_python_task_per_slot_through_sparkfns_daemon(spark: Any) -> None:
    group = spark.sparkContext.getLocalProperty("spark.jobGroup.id")
    warm_up(spark)
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") == group  # the caller's again
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(job) for job in tracker.getJobIdsForGroup(WARM_UP_GROUP)]
    assert jobs and all(job.status == "SUCCEEDED" for job in jobs), jobs
    stages = [tracker.getStageInfo(stage) for job in jobs for stage in job.stageIds]
    assert sum(s.numCompletedTasks for s in stages) >= spark.sparkContext.defaultParallelism
    daemons = [pid for pid in _descendants(os.getpid()) if _argv(pid)[1:3] == DAEMON_ARGS]
    assert daemons, "no sparkfn.runtime.spark.daemon runs after the warm-up"


DAEMON_ARGS = ["-m", "sparkfn.runtime.spark.daemon"]


def test_a_read_task_freezes_its_process_once() -> None:
    # The first task's imports (pyarrow, pandas, user code) join the frozen
    # objects, so pyspark's gc.collect() after each later task skips them.
    code = (
        "import gc\n"
        "from sparkfn.topics.spark.tasks import freeze_imports\n"
        "import pyarrow\n"
        "before = gc.get_freeze_count()\n"
        "assert list(freeze_imports(iter([1, 2]))) == [1, 2]\n"
        "once = gc.get_freeze_count()\n"
        "junk = [[i] for i in range(1000)]\n"
        "list(freeze_imports(iter([])))\n"
        "print(before, once, gc.get_freeze_count())\n"
    )
    done = _python(code)
    before, once, again = map(int, done.stdout.split())
    assert before == 0 and once > 10_000
    assert again == once  # later tasks' objects stay collectable


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by this interpreter in a fresh process; it must succeed."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
