"""A worker's settings: from arguments, else ``SPARKFN_WORKER_*`` variables, else a YAML file, else defaults.

>>> WorkerSettings.resolve(port=7000)               # the rest from the environment
>>> WorkerSettings.resolve(config_file="worker.yml")  # the same fields, snake_case or camelCase

The data dir and store URL follow :class:`sparkfn.config.settings.Settings`
(``SPARKFN_DATA_DIR``, ``SPARKFN_STORE_URL``) unless given here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sparkfn.api.errors import ConfigError
from sparkfn.api.lifecycle import StopMode
from sparkfn.config.function import describe_validation_error, read_yaml_fields
from sparkfn.config.settings import Settings

ENV_PREFIX = "SPARKFN_WORKER_"
DEFAULT_PORT = 6750
MIB = 1024 * 1024


class WorkerSettings(BaseModel):
    """How one worker process runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    data_dir: Path
    store_url: str
    spark_master: str = "local[*]"
    worker_id: str = ""
    # What SIGTERM does to the functions it runs: suspend resumes exactly where
    # they stopped when the worker comes back; drain finishes their input first.
    shutdown_mode: StopMode = StopMode.SUSPEND
    shutdown_timeout: float = Field(default=60.0, gt=0)
    max_upload_bytes: int = Field(default=100 * MIB, ge=1)
    max_expanded_bytes: int = Field(default=500 * MIB, ge=1)

    @property
    def packages_dir(self) -> Path:
        """Where uploaded packages are kept, by digest."""
        return self.data_dir / "packages"

    @property
    def url(self) -> str:
        """The worker's base URL."""
        return f"http://{self.host}:{self.port}"

    @classmethod
    def resolve(cls, *, config_file: str | Path | None = None, **given: Any) -> WorkerSettings:
        """Arguments win over ``SPARKFN_WORKER_<FIELD>`` variables, which win over the file."""
        fields: dict[str, Any] = {}
        if config_file is not None:
            fields.update(read_yaml_fields(config_file, "worker config file"))
        for name in cls.model_fields:
            value = os.environ.get(ENV_PREFIX + name.upper())
            if value:
                fields[name] = value
        fields.update({k: v for k, v in given.items() if v is not None})
        location = Settings.resolve(fields.get("data_dir"), fields.get("store_url"))
        fields["data_dir"] = location.data_dir
        fields["store_url"] = location.store_url
        if not fields.get("worker_id"):
            fields["worker_id"] = f"{os.uname().nodename}:{fields.get('port', DEFAULT_PORT)}"
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc, "worker settings")) from None
