"""The source and sink routes of the worker's REST API, on Pulsar's v3 paths.

``/admin/v3/sources`` and ``/admin/v3/sinks`` have the same routes, as
Pulsar's ``SourcesBase``/``SinksBase`` have them, plus sparkfn's ``stats``,
``drain`` and ``suspend`` (as for functions):

==========  =====================================================  ===============================
verb        path (under ``/admin/v3/sources`` or ``/sinks``)       what
==========  =====================================================  ===============================
POST        ``/{tenant}/{namespace}/{name}``                       register (multipart)
PUT         ``/{tenant}/{namespace}/{name}``                       update: a new version
DELETE      ``/{tenant}/{namespace}/{name}``                       deregister
GET         ``/{tenant}/{namespace}/{name}[?version=N]``           Pulsar's SourceConfig/SinkConfig
GET         ``/{tenant}/{namespace}``                              names in the namespace
GET         ``/{tenant}/{namespace}/{name}[/{instanceId}]/status`` SourceStatus / SinkStatus
GET         ``/{tenant}/{namespace}/{name}[/{instanceId}]/stats``  counters
POST        ``/{tenant}/{namespace}/{name}[/{instanceId}]/start``  also ``stop``, ``restart``
POST        ``/{tenant}/{namespace}/{name}[/{instanceId}]/drain``  also ``suspend``
GET         ``/builtinsources`` (``/builtinsinks``)                the built-ins, their fields
GET         ``/{type}/configdefinition``                           one built-in's config fields
==========  =====================================================  ===============================

Register and update take Pulsar's multipart fields: ``sourceConfig`` (or
``sinkConfig``: the config as JSON, Pulsar's camelCase or sparkfn's
snake_case, read by :func:`sparkfn.config.pulsar_connector.connector_fields`),
``data`` (a package file: its entry becomes the connector's ``py``) or
``url`` (an uploaded package's path or ``sha256:<hex>`` digest). Auth is
the functions' (tokens, roles, a tenant admin's own tenant and topics).

Register and update check a built-in's configs against its broker, which may
not answer (a bounded wait: :data:`sparkfn.connectors.builtin._broker.CHECK_SECONDS`).
They run on threads of their own, at most :data:`CONNECTOR_WRITES` at once,
never on the threads that serve the other routes: a burst of creates against
dead brokers leaves ``/health`` and every other route answering.
"""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations,
# and the config form field's alias (sourceConfig or sinkConfig) is a local of the router.
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import APIRouter, File, Form, UploadFile
from fastapi.responses import Response

from sparkfn.api.errors import ConfigError, ForbiddenError
from sparkfn.api.lifecycle import StopMode
from sparkfn.api.status import FunctionStats, SourceStatus
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.config.names import TopicName
from sparkfn.config.pulsar_connector import connector_fields, pulsar_shape
from sparkfn.config.secrets import masked, unmasked
from sparkfn.connectors.catalog import (
    ConfigFieldDefinition,
    ConnectorDefinition,
    definition,
    definitions,
)
from sparkfn.worker.api.connector_status import (
    PulsarSinkStatus,
    PulsarSourceStatus,
    sink_status,
    source_status,
)
from sparkfn.worker.api.params import InstanceId, Name, Namespace, Tenant, VersionNumber
from sparkfn.worker.api.submission import package_for, read_config_json
from sparkfn.worker.auth.access import Caller, check_topics_pattern
from sparkfn.worker.auth.tokens import Principal
from sparkfn.worker.packages.store import PackageStore
from sparkfn.worker.registry import Version
from sparkfn.worker.service import Worker

NAMED = "/{tenant}/{namespace}/{name}"
INSTANCE = NAMED + "/{instance_id}"
PackageFile = Annotated[UploadFile | None, File(alias="data", description="The package.")]
PackageUrl = Annotated[
    str | None, Form(alias="url", description="An upload's path or sha256:<hex> digest.")
]
Connector = SourceConfig | SinkConfig

CONNECTOR_WRITES = 64
"""Creates and updates of sources and sinks running at once; more wait their turn."""


def connector_info(version: Version[Any], warnings: tuple[str, ...] = ()) -> dict[str, Any]:
    """Pulsar's config JSON of ``version`` with sparkfn's version fields beside it."""
    shown = pulsar_shape(version.config, version.package_digest)
    shown["configs"] = masked(shown["configs"])  # secrets are never shown
    shown["secrets"] = masked(shown["secrets"] or {}, every=True)
    shown.update(
        version=version.version,
        packageDigest=version.package_digest,
        createdBy=version.created_by,
        createdAt=version.created_at.isoformat(),
    )
    if warnings:
        shown["warnings"] = list(warnings)
    return shown


def connectors_router(worker: Worker, kind: str) -> APIRouter:
    """The ``/admin/v3/sources`` (``kind`` ``source``) or ``/admin/v3/sinks`` routes."""
    router = APIRouter(tags=[f"{kind}s"])
    packages = PackageStore.from_settings(worker.open_store(), worker.settings)
    model: type[Connector] = SourceConfig if kind == "source" else SinkConfig
    form_name = f"{kind}Config"
    ConfigJson = Annotated[str, Form(alias=form_name, description="The config as JSON.")]  # noqa: N806
    plural = f"{kind}s"
    writes: list[anyio.CapacityLimiter] = []  # made on first use, inside the server's loop

    async def off_request_threads(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run ``call`` on a thread of the connector writes' own pool (see the module)."""
        if not writes:
            writes.append(anyio.CapacityLimiter(CONNECTOR_WRITES))
        return await anyio.to_thread.run_sync(call, limiter=writes[0])

    def submit(
        caller: Principal,
        path: dict[str, str],
        config_json: str,
        data: UploadFile | None,
        url: str | None,
        keep: Callable[[Connector, str | None], Version[Any]],
        current: Version[Any] | None = None,
    ) -> dict[str, Any]:
        what = f"{kind} " + "/".join(path.values())
        given = read_config_json(config_json, what, form_name)
        translated = connector_fields(kind, given, what=what)
        fields = translated.fields
        for key, expected in path.items():
            found = fields.get(key)
            if found is not None and found != expected:
                msg = (
                    f"{what}: {key} {found!r} in the {form_name} differs from the path's "
                    f"{expected!r}; the path names the {kind}"
                )
                raise ConfigError(msg)
        fields.update(path)
        # A config read back from get carries masks: each keeps the stored secret.
        for field, every in (("configs", False), ("secrets", True)):
            if isinstance(fields.get(field), dict):
                before = getattr(current.config, field) if current is not None else {}
                fields[field] = unmasked(fields[field], before, what, field=field, every=every)
        kept = current.package_digest if current is not None else None
        # A built-in type named in an update replaces the kept package.
        with package_for(
            packages, caller, what=what, owner=path["tenant"], data=data, url=url,
            kept=None if fields.get(f"{kind}_type") else kept,
            names_py=bool(fields.get("py")), default_filename=f"{kind}.py",
        ) as package:  # fmt: skip
            if package is not None:
                fields["py"] = str(package.entry)
            config = model.build(**fields)
            _check_topics(caller, config)
            version = keep(config, package.digest if package is not None else None)
        return connector_info(version, translated.warnings)

    def fqn(tenant: str, namespace: str, name: str) -> str:
        return f"{tenant}/{namespace}/{name}"

    @router.get(f"/builtin{plural}", response_model=list[ConnectorDefinition])
    def builtins() -> list[ConnectorDefinition]:
        return definitions(kind)

    @router.get("/{type_name}/configdefinition", response_model=list[ConfigFieldDefinition])
    def config_definition(type_name: str) -> list[ConfigFieldDefinition]:
        return definition(kind, type_name).config_field_definitions

    @router.post(NAMED)
    async def register(
        caller: Caller,
        tenant: Tenant,
        namespace: Namespace,
        name: Name,
        config_json: ConfigJson = "{}",
        data: PackageFile = None,
        url: PackageUrl = None,
    ) -> dict[str, Any]:
        def create(config: Connector, digest: str | None) -> Version[Any]:
            return worker.create(config, package_digest=digest, who=caller.subject)

        path = {"tenant": tenant, "namespace": namespace, "name": name}
        return await off_request_threads(
            partial(submit, caller, path, config_json, data, url, create)
        )

    @router.put(NAMED)
    async def update(
        caller: Caller,
        tenant: Tenant,
        namespace: Namespace,
        name: Name,
        config_json: ConfigJson = "{}",
        data: PackageFile = None,
        url: PackageUrl = None,
        mode: Annotated[StopMode, Form()] = StopMode.DRAIN,
    ) -> dict[str, Any]:
        def next_version(config: Connector, digest: str | None) -> Version[Any]:
            return worker.update(config, package_digest=digest, who=caller.subject, mode=mode)

        def update_it() -> dict[str, Any]:
            # A config-only update keeps the code; the CLI sends the whole config, as for
            # functions.
            current = worker.registry_for(kind).get(fqn(tenant, namespace, name))
            path = {"tenant": tenant, "namespace": namespace, "name": name}
            return submit(caller, path, config_json, data, url, next_version, current)

        return await off_request_threads(update_it)

    @router.delete(NAMED)
    def deregister(tenant: Tenant, namespace: Namespace, name: Name) -> dict[str, Any]:
        return connector_info(worker.delete(fqn(tenant, namespace, name), kind=kind))

    @router.get(NAMED)
    def get(
        tenant: Tenant, namespace: Namespace, name: Name, version: VersionNumber | None = None
    ) -> dict[str, Any]:
        return connector_info(worker.registry_for(kind).get(fqn(tenant, namespace, name), version))

    @router.get("/{tenant}/{namespace}", response_model=list[str])
    def list_names(tenant: Tenant, namespace: Namespace) -> list[str]:
        return worker.registry_for(kind).names(tenant, namespace)

    shape = PulsarSourceStatus if kind == "source" else PulsarSinkStatus

    def pulsar_status(name: str) -> PulsarSourceStatus | PulsarSinkStatus:
        status = worker.connector_status(kind, name)
        if isinstance(status, SourceStatus):
            return source_status(status, worker.settings.worker_id)
        return sink_status(status)

    @router.get(NAMED + "/status", response_model=shape)
    def status(tenant: Tenant, namespace: Namespace, name: Name) -> Any:
        return pulsar_status(fqn(tenant, namespace, name))

    @router.get(INSTANCE + "/status")
    def instance_status(
        tenant: Tenant, namespace: Namespace, name: Name, instance_id: InstanceId
    ) -> Any:
        whole = pulsar_status(fqn(tenant, namespace, name))
        for item in whole.instances:
            if item.instance_id == instance_id:
                return item.status.model_dump(mode="json", by_alias=True)
        raise _no_instance(worker, kind, whole.name, instance_id, whole.num_instances)

    @router.get(NAMED + "/stats")
    def stats(tenant: Tenant, namespace: Namespace, name: Name) -> Any:
        return _stats_json(worker.connector_stats(kind, fqn(tenant, namespace, name)))

    @router.get(INSTANCE + "/stats")
    def instance_stats(
        tenant: Tenant, namespace: Namespace, name: Name, instance_id: InstanceId
    ) -> Any:
        whole = _stats_json(worker.connector_stats(kind, fqn(tenant, namespace, name)))
        for item in whole["instances"]:
            if item["instanceId"] == instance_id:
                return item.get("metrics", item.get("stats"))
        count = len(whole["instances"])
        raise _no_instance(worker, kind, fqn(tenant, namespace, name), instance_id, count)

    no_content: dict[str, Any] = {"methods": ["POST"], "status_code": 204}
    no_content["response_class"] = Response
    for action in ("start", "stop", "restart"):
        router.add_api_route(NAMED + f"/{action}", _action(worker, kind, action), **no_content)
        router.add_api_route(INSTANCE + f"/{action}", _action(worker, kind, action), **no_content)
    for stop_mode in (StopMode.DRAIN, StopMode.SUSPEND):
        for path in (NAMED, INSTANCE):
            router.add_api_route(
                path + f"/{stop_mode.value}", _stopper(worker, kind, stop_mode), **no_content
            )
    return router


def _stats_json(stats: FunctionStats | SourceStatus) -> dict[str, Any]:
    if isinstance(stats, FunctionStats):
        return stats.model_dump(mode="json", by_alias=True)
    return {
        "name": stats.name,
        "state": stats.state.value,
        "instances": [
            {"instanceId": i.instance_id, "stats": i.stats.model_dump(mode="json", by_alias=True)}
            for i in stats.instances
        ],
    }


def _no_instance(worker: Worker, kind: str, name: str, instance_id: int, count: int) -> Exception:
    msg = f"{kind} {name} has no instance {instance_id} (instances 0 to {count - 1})"
    return worker.registry_for(kind).missing(msg)


def _check_topics(principal: Principal, config: Connector) -> None:
    """:class:`ForbiddenError` if a tenant admin's connector names another tenant's topic."""
    tenant = principal.tenant
    if principal.is_superuser or tenant is None:
        return
    kind = "source" if isinstance(config, SourceConfig) else "sink"
    if isinstance(config, SourceConfig):
        named = [("topicName", config.output)]
    else:
        named = [("inputs", topic) for topic in config.inputs]
    for field, topic in named:
        if TopicName.parse(topic, field=field).tenant != tenant:
            msg = (
                f"{kind} {config.fqn}: {field} {topic} is outside tenant {tenant!r}; "
                f"{principal.describe()} may use its own tenant's topics only"
            )
            raise ForbiddenError(msg)
    check_topics_pattern(principal, f"{kind} {config.fqn}", getattr(config, "topics_pattern", None))


def _action(worker: Worker, kind: str, action: str) -> Any:
    def act(
        tenant: Tenant, namespace: Namespace, name: Name, instance_id: InstanceId | None = None
    ) -> Response:
        getattr(worker, action)(f"{tenant}/{namespace}/{name}", instance_id, kind=kind)
        return Response(status_code=204)

    act.__name__ = f"{action}_{kind}"
    return act


def _stopper(worker: Worker, kind: str, mode: StopMode) -> Any:
    def stop(
        tenant: Tenant, namespace: Namespace, name: Name, instance_id: InstanceId | None = None
    ) -> Response:
        worker.stop(f"{tenant}/{namespace}/{name}", instance_id, mode=mode, kind=kind)
        return Response(status_code=204)

    stop.__name__ = f"{mode.value}_{kind}"
    return stop
