"""A worker's settings: from arguments, else ``SPARKFN_WORKER_*`` variables, else a YAML file, else defaults.

>>> WorkerSettings.resolve(port=7000)               # the rest from the environment
>>> WorkerSettings.resolve(config_file="worker.yml")  # the same fields, snake_case or camelCase

The data dir and store URL follow :class:`sparkfn.config.settings.Settings`
(``SPARKFN_DATA_DIR``, ``SPARKFN_STORE_URL``) unless given here.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from sparkfn.api.errors import ConfigError
from sparkfn.api.lifecycle import StopMode
from sparkfn.config.function import describe_validation_error, read_yaml_fields
from sparkfn.config.settings import Settings
from sparkfn.worker.auth.tokens import TokenKeys

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
    # This worker's id in its cluster (default host:port); every instance's status shows it.
    worker_id: str = ""
    # Seconds a worker stays a member of its store's cluster without a heartbeat
    # written (sparkfn.worker.cluster.membership); it renews it every third of that.
    lease: float = Field(default=10.0, gt=0)
    # How many instances the cluster's leader may assign to this worker. The default
    # bounds nothing a worker can hold (a worker holds 1,000 idle functions in under
    # 3 GiB, benchmarks/density.py); set it to keep a worker's share down.
    capacity: int = Field(default=10_000, ge=1)
    # What SIGTERM does to the functions it runs: suspend resumes exactly where
    # they stopped when the worker comes back; drain finishes their input first.
    shutdown_mode: StopMode = StopMode.SUSPEND
    shutdown_timeout: float = Field(default=60.0, gt=0)
    # A function whose input has been quiet this long (seconds) has its Spark
    # query parked: no query, no source process, until input arrives (the
    # first message then waits about a second for the start). 0: never.
    park_idle_after: float = Field(default=30.0, ge=0)
    # Functions share one streaming query per group (sparkfn.runtime.group):
    # a batch's fixed cost is paid once for all of them. Off: a query each.
    groups: bool = True
    # Records one member of a group may take in one batch (its own
    # max_records_per_batch wins): how long a flooded function holds the rest.
    group_member_budget: int = Field(default=20_000, ge=1)
    # Seconds one member's part of a group's batch may take; a member past it
    # (or one that fills its row budget batch after batch) gets a query of its own.
    group_member_seconds: float = Field(default=5.0, gt=0)
    # The shortest time (s) between the starts of two of the shared group's
    # batches once 20 or more functions had work in the last one (fewer: that
    # share of it; sparkfn.runtime.group.extras.BatchSpacing): under steady
    # input from many functions a batch gathers more of their messages instead
    # of paying Spark's cost per batch more often; a function alone waits not.
    group_trigger_interval: float = Field(default=0.25, ge=0)
    # Pulsar's allowAutoTopicCreation: a function's missing topics are created
    # on first use (when the store allows it too: `sparkfn topics auto-creation`).
    allow_auto_topic_creation: bool = True
    max_upload_bytes: int = Field(default=100 * MIB, ge=1)
    max_expanded_bytes: int = Field(default=500 * MIB, ge=1)
    # Where a package's requirements are found at registration, besides the
    # wheels inside it: pip's own configuration when empty; "none" for no
    # index at all; else the URL of a package index.
    package_index_url: str = ""
    # Bearer-token auth (sparkfn.worker.auth.access): off by default, which only a
    # loopback address may serve unless allow_unauthenticated says so.
    auth_enabled: bool = False
    token_secret_key: SecretStr | None = None  # HS256
    token_public_key: str | None = None  # RS256: PEM file (verifies)
    token_private_key: str | None = None  # RS256: PEM file (signs; `sparkfn tokens create`)
    allow_unauthenticated: bool = False
    # The Host names the worker answers (sparkfn.worker.auth.origins), against DNS
    # rebinding: empty for localhost, 127.0.0.1, [::1] and the bind host at
    # the worker's port; "name" (the worker's port), "name:port", or "*" for any.
    allowed_hosts: tuple[str, ...] = ()

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        if isinstance(value, str):  # SPARKFN_WORKER_ALLOWED_HOSTS=a,b:8080
            value = [value]
        if isinstance(value, list | tuple):
            return tuple(p.strip() for entry in value for p in str(entry).split(",") if p.strip())
        return value

    @model_validator(mode="after")
    def _check_auth(self) -> WorkerSettings:
        if self.auth_enabled or self.has_token_key:
            self.token_keys()  # a key that cannot be used fails here, before anything starts
        if not (self.auth_enabled or self.allow_unauthenticated or is_loopback(self.host)):
            msg = (
                f"host {self.host!r} is not a loopback address and auth is off: anyone who "
                "reaches it could run code on this machine; set auth_enabled with a token key, "
                "or allow_unauthenticated to serve without auth anyway"
            )
            raise ValueError(msg)
        return self

    @property
    def has_token_key(self) -> bool:
        """Whether a token key (secret, public or private) is configured."""
        return bool(self.token_secret_key or self.token_public_key or self.token_private_key)

    def token_keys(self) -> TokenKeys:
        """The keys that verify (and, with a secret or private key, sign) tokens."""
        secret = self.token_secret_key.get_secret_value() if self.token_secret_key else None
        return TokenKeys.load(
            secret_key=secret,
            public_key=self.token_public_key,
            private_key=self.token_private_key,
        )

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


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (``0.0.0.0`` is not: it is every address)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost: it may resolve to anything
