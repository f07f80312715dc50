"""The driver's JVM compiles with C1 only (session.JIT_OPTIONS): sparkfn's JVM work is
many short micro-batches of Spark's planning code, where C2's compiling cost more CPU
than it saved (benchmarks/README.md, eighth session)."""

from __future__ import annotations

from typing import Any

from sparkfn.runtime.spark.session import DEFAULT_CONF, JIT_OPTIONS


def _vm_option(spark: Any, name: str) -> str:
    jvm = spark.sparkContext._jvm
    hotspot = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(hotspot)
    return str(bean.getVMOption(name).getValue())


def test_the_sessions_jvm_runs_c1_only(spark: Any) -> None:
    assert _vm_option(spark, "TieredStopAtLevel") == "1"
    args = list(
        spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    assert JIT_OPTIONS in args


def test_the_jit_choice_is_a_default_a_users_extra_options_override() -> None:
    # Spark puts spark.driver.defaultJavaOptions before spark.driver.extraJavaOptions
    # (the later flag wins in the JVM): a user's own JIT flags are never replaced.
    assert DEFAULT_CONF["spark.driver.defaultJavaOptions"] == JIT_OPTIONS
    assert "spark.driver.extraJavaOptions" not in DEFAULT_CONF
