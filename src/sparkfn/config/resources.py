"""What a function's instance is given: Pulsar's ``resources``, as Spark settings.

>>> Resources(cpu=2.5, ram=2 * 2**30).spark_conf()
{'spark.task.cpus': '3', 'spark.executor.pyspark.memory': '2048m'}

An instance runs as Spark tasks in Spark's Python workers, so ``cpu`` is the
cores each task takes (``spark.task.cpus``, a whole number: rounded up; one
core or less is Spark's default and sets nothing) and ``ram`` the memory of
the Python workers (``spark.executor.pyspark.memory``, in MiB, rounded up).
Spark allots no disk (Pulsar's ``disk`` is warned about). These are
settings of a Spark session, given when it is created: ``localrun`` creates
its session with them; a worker's functions share the worker's session,
whose own settings decide.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

_MIB = 1 << 20


class Resources(BaseModel):
    """Cores and bytes of memory per instance, as Pulsar counts them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    ram: int | None = Field(default=None, gt=0)

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings the resources ask for."""
        conf: dict[str, str] = {}
        if self.cpu is not None and math.ceil(self.cpu) > 1:
            conf["spark.task.cpus"] = str(math.ceil(self.cpu))
        if self.ram is not None:
            conf["spark.executor.pyspark.memory"] = f"{math.ceil(self.ram / _MIB)}m"
        return conf
