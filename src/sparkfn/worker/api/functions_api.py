"""The function routes of the worker's REST API, on Pulsar's v3 paths (``/admin/v3/functions/...``).

Routes, as Pulsar's ``FunctionsApiV3Resource`` has them, plus sparkfn's
``drain`` and ``suspend``:

==========  =====================================================  ==========================
verb        path (under ``/admin/v3/functions``)                   what
==========  =====================================================  ==========================
POST        ``/{tenant}/{namespace}/{name}``                       register (multipart)
PUT         ``/{tenant}/{namespace}/{name}``                       update: a new version
DELETE      ``/{tenant}/{namespace}/{name}``                       deregister
GET         ``/{tenant}/{namespace}/{name}[?version=N]``           config of a version
GET         ``/{tenant}/{namespace}``                              names in the namespace
GET         ``/{tenant}/{namespace}/{name}[/{instanceId}]/status`` ``FunctionStatus``
GET         ``/{tenant}/{namespace}/{name}[/{instanceId}]/stats``  ``FunctionStats``
POST        ``/{tenant}/{namespace}/{name}[/{instanceId}]/start``  also ``stop``, ``restart``
POST        ``/{tenant}/{namespace}/{name}[/{instanceId}]/drain``  also ``suspend``
GET, POST   ``/{tenant}/{namespace}/{name}/state/{key}``           query or put state
==========  =====================================================  ==========================

Register and update take Pulsar's multipart fields: ``functionConfig`` (the
config as JSON, Pulsar's camelCase or sparkfn's snake_case), ``data`` (the
package file) or ``url`` (the path or ``sha256:<hex>`` digest of a package
uploaded before, see :mod:`sparkfn.worker.api.packages_api`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, field_serializer, field_validator
from pydantic.alias_generators import to_camel

from sparkfn.api.errors import ConfigError, FunctionNotFoundError
from sparkfn.api.lifecycle import StopMode
from sparkfn.api.status import (
    FunctionInstanceStats,
    FunctionInstanceStatsData,
    FunctionInstanceStatus,
    FunctionInstanceStatusData,
    FunctionStats,
    FunctionStatus,
)
from sparkfn.config.function import FunctionConfig
from sparkfn.config.pulsar import canonical
from sparkfn.config.pulsar_view import pulsar_view
from sparkfn.config.secrets import masked, unmasked
from sparkfn.worker.api.params import (
    Counter,
    InstanceId,
    Name,
    Namespace,
    StateKey,
    Tenant,
    VersionNumber,
)
from sparkfn.worker.api.submission import package_for, read_config_json
from sparkfn.worker.auth.access import Caller, check_function_topics
from sparkfn.worker.auth.tokens import Principal
from sparkfn.worker.packages.store import PackageStore
from sparkfn.worker.registry import FunctionVersion
from sparkfn.worker.service import Worker

FUNCTION = "/{tenant}/{namespace}/{name}"
INSTANCE = FUNCTION + "/{instance_id}"

# A worker's functions run in its one Spark session, whose core settings it was started with.
SHARED_SESSION = (
    "resources: the functions of a worker share its Spark session, whose settings "
    "(spark.task.cpus, spark.executor.pyspark.memory) decide; ignored"
)

ConfigJson = Annotated[str, Form(alias="functionConfig", description="The config as JSON.")]
PackageFile = Annotated[UploadFile | None, File(alias="data", description="The package.")]
PackageUrl = Annotated[
    str | None, Form(alias="url", description="An upload's path or sha256:<hex> digest.")
]


FunctionInfo = dict[str, Any]
"""One version of a registered function: Pulsar's ``FunctionConfig`` JSON
(:func:`~sparkfn.config.pulsar_view.pulsar_view`: camelCase, Pulsar's enum
spellings, ``inputSpecs``, ``resources``, ...), sparkfn's own fields
alongside, and the version's ``version``, ``packageDigest``, ``createdBy``,
``createdAt`` and ``warnings`` (one line per field of the given
functionConfig that sparkfn ignores, naming it; register and update only)."""


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def function_info(version: FunctionVersion, warnings: Sequence[str] = ()) -> FunctionInfo:
    """The API's view of ``version``."""
    return {
        **pulsar_view(version.config),
        # Its secrets are never shown; an update that sends the mask back keeps each.
        "secrets": masked(version.config.secrets, every=True),
        "version": version.version,
        "packageDigest": version.package_digest,
        "createdBy": version.created_by,
        "createdAt": _utc(version.created_at).isoformat().replace("+00:00", "Z"),
        "warnings": list(warnings),
    }


class StateValue(BaseModel):
    """Pulsar's ``FunctionState``: a key's value (string or base64 bytes) or counter."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    key: str
    string_value: str | None = None
    byte_value: bytes | None = None  # base64 in JSON, both ways, as Pulsar's (Jackson's)
    number_value: Counter | None = None
    version: int | None = None

    @field_validator("byte_value", mode="before")
    @classmethod
    def _from_base64(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            msg = f"byteValue must be base64 (got {value[:40]!r})"
            raise ValueError(msg) from None

    @field_serializer("byte_value")
    def _to_base64(self, value: bytes | None) -> str | None:
        return None if value is None else base64.b64encode(value).decode()


def functions_router(worker: Worker) -> APIRouter:
    """The ``/admin/v3/functions`` routes."""
    router = APIRouter(tags=["functions"])
    packages = PackageStore.from_settings(worker.open_store(), worker.settings)

    def submit(
        caller: Principal,
        path: dict[str, str],
        config_json: str,
        data: UploadFile | None,
        url: str | None,
        keep: Callable[[FunctionConfig, str | None], FunctionVersion],
        kept: str | None = None,
        stored_secrets: Mapping[str, str] | None = None,
    ) -> FunctionInfo:
        """Read the request into a config and ``keep`` it (create or update, with the
        package's digest); a package this request stored goes again if it is refused.

        The package is the upload ``data`` (held by the function's tenant from now
        on), the caller's package ``url`` names, or the function's own ``kept`` one.
        """
        what = "function " + "/".join(path.values())
        given = read_config_json(config_json, what, "functionConfig")
        # The path names the function; the body is read as FunctionConfig.from_yaml reads a file.
        fields: dict[str, Any] = dict(path)
        _check_names(given, path)
        if isinstance(given.get("secrets"), dict):  # read back from get: masks keep the stored
            given["secrets"] = unmasked(
                given["secrets"], stored_secrets or {}, what, field="secrets", every=True
            )
        with package_for(
            packages, caller, what=what, owner=path["tenant"], data=data, url=url, kept=kept,
            names_py=bool(given.get("py")), default_filename="function.py",
        ) as package:  # fmt: skip
            if package is not None:
                fields["py"] = str(package.entry)
            config, warnings = FunctionConfig.assemble(given, fields)
            check_function_topics(caller, config)
            version = keep(config, package.digest if package is not None else None)
        if config.resources.spark_conf():
            warnings = (*warnings, SHARED_SESSION)
        return function_info(version, warnings)

    @router.post(FUNCTION, response_model=FunctionInfo)
    def register(
        caller: Caller,
        tenant: Tenant,
        namespace: Namespace,
        name: Name,
        config_json: ConfigJson = "{}",
        data: PackageFile = None,
        url: PackageUrl = None,
    ) -> FunctionInfo:
        def create(config: FunctionConfig, digest: str | None) -> FunctionVersion:
            return worker.create(config, package_digest=digest, who=caller.subject)

        path = {"tenant": tenant, "namespace": namespace, "name": name}
        return submit(caller, path, config_json, data, url, create)

    @router.put(FUNCTION, response_model=FunctionInfo)
    def update(
        caller: Caller,
        tenant: Tenant,
        namespace: Namespace,
        name: Name,
        config_json: ConfigJson = "{}",
        data: PackageFile = None,
        url: PackageUrl = None,
        mode: Annotated[StopMode, Form()] = StopMode.DRAIN,
    ) -> FunctionInfo:
        def next_version(config: FunctionConfig, digest: str | None) -> FunctionVersion:
            return worker.update(config, package_digest=digest, who=caller.subject, mode=mode)

        # A config-only update keeps the code.
        current = worker.registry.get(f"{tenant}/{namespace}/{name}")
        path = {"tenant": tenant, "namespace": namespace, "name": name}
        return submit(
            caller, path, config_json, data, url, next_version,
            current.package_digest, current.config.secrets,
        )  # fmt: skip

    @router.delete(FUNCTION, response_model=FunctionInfo)
    def deregister(tenant: Tenant, namespace: Namespace, name: Name) -> FunctionInfo:
        return function_info(worker.delete(f"{tenant}/{namespace}/{name}"))

    @router.get(FUNCTION, response_model=FunctionInfo)
    def get(
        tenant: Tenant, namespace: Namespace, name: Name, version: VersionNumber | None = None
    ) -> FunctionInfo:
        return function_info(worker.registry.get(f"{tenant}/{namespace}/{name}", version))

    @router.get("/{tenant}/{namespace}", response_model=list[str])
    def list_functions(tenant: Tenant, namespace: Namespace) -> list[str]:
        return worker.registry.names(tenant, namespace)

    @router.get(FUNCTION + "/status", response_model=FunctionStatus)
    def status(tenant: Tenant, namespace: Namespace, name: Name) -> FunctionStatus:
        return worker.status(f"{tenant}/{namespace}/{name}")

    @router.get(INSTANCE + "/status", response_model=FunctionInstanceStatusData)
    def instance_status(
        tenant: Tenant, namespace: Namespace, name: Name, instance_id: InstanceId
    ) -> FunctionInstanceStatusData:
        whole = worker.status(f"{tenant}/{namespace}/{name}")
        return _pick(whole.instances, instance_id, whole.name).status

    @router.get(FUNCTION + "/stats", response_model=FunctionStats)
    def stats(tenant: Tenant, namespace: Namespace, name: Name) -> FunctionStats:
        return worker.stats(f"{tenant}/{namespace}/{name}")

    @router.get(INSTANCE + "/stats", response_model=FunctionInstanceStatsData)
    def instance_stats(
        tenant: Tenant, namespace: Namespace, name: Name, instance_id: InstanceId
    ) -> FunctionInstanceStatsData:
        fqfn = f"{tenant}/{namespace}/{name}"
        return _pick(worker.stats(fqfn).instances, instance_id, fqfn).metrics

    no_content: dict[str, Any] = {
        "methods": ["POST"],
        "status_code": 204,
        "response_class": Response,
    }
    for action in ("start", "stop", "restart"):
        router.add_api_route(FUNCTION + f"/{action}", _action(worker, action), **no_content)
        router.add_api_route(INSTANCE + f"/{action}", _action(worker, action), **no_content)
    for mode in (StopMode.DRAIN, StopMode.SUSPEND):
        router.add_api_route(FUNCTION + f"/{mode.value}", _stopper(worker, mode), **no_content)
        router.add_api_route(INSTANCE + f"/{mode.value}", _stopper(worker, mode), **no_content)

    @router.get(FUNCTION + "/state/{key}", response_model=StateValue)
    def query_state(tenant: Tenant, namespace: Namespace, name: Name, key: StateKey) -> StateValue:
        fqfn = f"{tenant}/{namespace}/{name}"
        found = worker.get_state(fqfn, key)
        if found is None:
            msg = f"function {fqfn} has no state under key {key!r}"
            raise FunctionNotFoundError(msg)
        return _state_value(key, found.value, found.counter)

    @router.post(FUNCTION + "/state/{key}", response_model=StateValue)
    def put_state(
        tenant: Tenant,
        namespace: Namespace,
        name: Name,
        key: StateKey,
        state: Annotated[str, Form()],
    ) -> StateValue:
        fqfn = f"{tenant}/{namespace}/{name}"
        try:
            given = StateValue.model_validate_json(state)
        except ValueError as exc:
            msg = f"function {fqfn}: state for key {key!r} is not a FunctionState JSON: {exc}"
            raise ConfigError(msg) from None
        if given.key != key:
            msg = (
                f"function {fqfn}: key {given.key!r} in the state differs from the path's "
                f"key {key!r}; give one key"
            )
            raise ConfigError(msg)
        value = given.byte_value
        if given.string_value is not None:
            value = given.string_value.encode()
        worker.put_state(fqfn, key, value, given.number_value)
        found = worker.get_state(fqfn, key)
        assert found is not None
        return _state_value(key, found.value, found.counter)

    return router


def _check_names(given: dict[str, Any], path: dict[str, str]) -> None:
    """:class:`ConfigError` if the body's tenant, namespace, name or fqfn is not the path's."""
    fqfn = "/".join(path.values())
    named = canonical(given, f"function {fqfn}", known=FunctionConfig.model_fields)
    parts = str(named.get("fqfn") or "").split("/")
    from_fqfn = dict(zip(path, parts, strict=True)) if len(parts) == len(path) else {}
    for key, expected in path.items():
        for found in (named.get(key), from_fqfn.get(key)):
            if found is not None and found != expected:
                msg = (
                    f"function {fqfn}: {key} {found!r} in the functionConfig differs from "
                    f"the path's {expected!r}; the path names the function"
                )
                raise ConfigError(msg)


def _action(worker: Worker, action: str) -> Any:
    def act(
        tenant: Tenant, namespace: Namespace, name: Name, instance_id: InstanceId | None = None
    ) -> Response:
        fqfn = f"{tenant}/{namespace}/{name}"
        getattr(worker, action)(fqfn, instance_id)
        return Response(status_code=204)

    act.__name__ = f"{action}_function"
    return act


def _stopper(worker: Worker, mode: StopMode) -> Any:
    def stop(
        tenant: Tenant, namespace: Namespace, name: Name, instance_id: InstanceId | None = None
    ) -> Response:
        worker.stop(f"{tenant}/{namespace}/{name}", instance_id, mode=mode)
        return Response(status_code=204)

    stop.__name__ = f"{mode.value}_function"
    return stop


Instance = TypeVar("Instance", FunctionInstanceStatus, FunctionInstanceStats)


def _pick(items: list[Instance], instance_id: int, fqfn: str) -> Instance:
    for item in items:
        if item.instance_id == instance_id:
            return item
    msg = f"function {fqfn} has no instance {instance_id} (instances 0 to {len(items) - 1})"
    raise FunctionNotFoundError(msg)


def _state_value(key: str, value: bytes | None, counter: int | None) -> StateValue:
    text = None
    if value is not None:
        try:
            text = value.decode()
        except UnicodeDecodeError:
            text = None
    return StateValue(
        key=key,
        string_value=text,
        byte_value=value if text is None else None,
        number_value=counter,
    )
