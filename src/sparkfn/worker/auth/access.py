"""Who may call which route of the worker's REST API.

With ``auth_enabled`` every request carries ``Authorization: Bearer <jwt>``
(:mod:`sparkfn.worker.auth.tokens`), except the public routes: ``/health`` and the
OpenAPI document with its viewers (``/openapi.json``, ``/docs``, ``/redoc``),
which describe the API and hold no data. Without a valid token the answer is
401 ``unauthorized``, saying whether the token is missing, expired or does
not verify; with a token whose role may not use the route, 403 ``forbidden``.
With auth off (the default, allowed on a loopback address only) every
request is the superuser ``anonymous``.

Who may call a route follows from its path, for every route the app has, so
a route added later is covered without doing anything:

* a path with ``{tenant}`` (functions, their state, topics, trigger): a
  superuser, or the tenant admin of that tenant; a tenant-A admin gets 403 on
  every tenant-B path, and a listing under ``{tenant}`` lists one tenant;
* a path without ``{tenant}`` that :data:`ANY_ROLE` names (readiness, the
  package routes): any valid token, the route itself confining a tenant
  admin (its package paths are under ``{tenant}/``: :func:`owns_package_path`);
* any other path without ``{tenant}`` (metrics): superusers only, since it
  spans every tenant.

The check is an ASGI middleware (:class:`AccessControl`) in front of the
router, so a request is refused before its body (an upload, say) is read.
Routes learn the caller with the :data:`Caller` dependency.

A tenant admin's function may read and write only its tenant's topics
(:func:`check_function_topics`). Its code, though, runs in the worker's
Spark with the worker's rights: auth guards the API, not what the code does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.routing import RouteContext, iter_route_contexts
from fastapi.security import HTTPBearer
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from sparkfn.api.errors import AuthError, ForbiddenError
from sparkfn.config.function import FunctionConfig
from sparkfn.config.names import TopicName
from sparkfn.config.topics_pattern import TopicsPattern
from sparkfn.worker.auth.tokens import Principal, Role, TokenKeys
from sparkfn.worker.http import ErrorBody, error_response, status_of

# Scope keys under which the middleware leaves the caller, and the route it checked.
PRINCIPAL = "sparkfn.principal"
AUTHORIZED_ROUTE = "sparkfn.authorized_route"
_NOTHING = object()
# Everyone when auth is off.
ANONYMOUS = Principal("anonymous", Role.SUPERUSER)
# Reachable without a token: liveness, and the API's description.
# The console's page and files hold no data: it reads the API with the user's token.
PUBLIC_PATHS = frozenset({"/health", "/", "/console/assets/{asset}"})
# Routes outside any tenant that every valid token may call: (method, path).
ANY_ROLE: frozenset[tuple[str, str]] = frozenset(
    {
        # Readiness says only whether the store and Spark answer.
        ("GET", "/ready"),
        # Packages: a tenant admin's paths are under its tenant, its listing
        # shows those only (sparkfn.worker.api.packages_api).
        ("POST", "/admin/v3/functions/upload"),
        ("GET", "/admin/v3/functions/download"),
        ("GET", "/admin/v3/packages"),
        # The console's listings: a tenant admin's show its tenant only
        # (sparkfn.worker.api.console).
        ("GET", "/admin/v3/functions"),
        ("GET", "/admin/v2/tenants"),
        # The built-in connectors and their config fields: no tenant's data.
        ("GET", "/admin/v3/sources/builtinsources"),
        ("GET", "/admin/v3/sinks/builtinsinks"),
        ("GET", "/admin/v3/functions/connectors"),
        ("GET", "/admin/v3/sources/{type_name}/configdefinition"),
        ("GET", "/admin/v3/sinks/{type_name}/configdefinition"),
    }
)
BEARER = "Bearer"
DIGEST_PREFIX = "sha256:"


class AccessControl:
    """ASGI middleware: authenticate the bearer token, then check the route's access rule."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: list[BaseRoute],
        keys: TokenKeys | None,
        public: frozenset[str],
    ) -> None:
        self.app = app
        self.routes = routes  # the router's own list: routes added later are seen too
        self.keys = keys
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = self._route_of(scope)
        if route is not None and route.path in self.public:
            scope[AUTHORIZED_ROUTE] = route.original_route
            await self.app(scope, receive, send)
            return
        try:
            principal = self._authenticate(scope)
            if route is not None:
                authorize(principal, scope["method"], str(route.path), route.path_params)
        except AuthError as exc:
            response = error_response(status_of(exc), exc.reason, str(exc))
            if not isinstance(exc, ForbiddenError):
                response.headers["WWW-Authenticate"] = BEARER  # RFC 6750
            await response(scope, receive, send)
            return
        scope[PRINCIPAL] = principal
        scope[AUTHORIZED_ROUTE] = route.original_route if route is not None else None
        await self.app(scope, receive, send)

    def _route_of(self, scope: Scope) -> _Selected | None:
        """The route that will answer, as the router picks it: the first that fully matches.

        None when no route answers this method and path: the router then
        answers 404 or 405 to an authenticated caller.
        """
        for context in iter_route_contexts(self.routes):
            match, child = context.matches(scope)
            if match is Match.FULL:
                return _Selected(context, dict(child.get("path_params", {})))
        return None

    def _authenticate(self, scope: Scope) -> Principal:
        if self.keys is None:
            return ANONYMOUS
        headers = dict(scope["headers"])
        header = headers.get(b"authorization", b"").decode("latin-1").strip()
        if not header:
            msg = (
                "no token: send the header 'Authorization: Bearer <token>' (sparkfn tokens create)"
            )
            raise AuthError(msg)
        scheme, _, token = header.partition(" ")
        if scheme.lower() != BEARER.lower() or not token.strip():
            msg = f"the Authorization header must be 'Bearer <token>'; got a {scheme!r} header"
            raise AuthError(msg)
        return self.keys.verify(token.strip())


@dataclass(frozen=True)
class _Selected:
    """The route a request goes to, with the full path template and the path's parameters."""

    context: RouteContext
    path_params: dict[str, Any]

    @property
    def path(self) -> str:
        return str(self.context.path)

    @property
    def original_route(self) -> BaseRoute:
        return self.context.original_route


def authorize(principal: Principal, method: str, route_path: str, params: dict[str, Any]) -> None:
    """Raise :class:`ForbiddenError` unless ``principal`` may call this route with these parameters."""
    if principal.is_superuser:
        return
    tenant = params.get("tenant")
    if tenant is not None:
        if tenant != principal.tenant:
            msg = (
                f"{principal.describe()} may not use tenant {tenant!r}: "
                f"a tenant admin uses its own tenant only ({method} {route_path})"
            )
            raise ForbiddenError(msg)
        return
    if (method, route_path) not in ANY_ROLE:
        msg = (
            f"{method} {route_path} spans every tenant and is for superusers; "
            f"{principal.describe()} is not one"
        )
        raise ForbiddenError(msg)


def caller(request: Request) -> Principal:
    """The principal the middleware authenticated for this request."""
    principal = request.scope.get(PRINCIPAL)
    if not isinstance(principal, Principal):
        # Only a public route or an app without AccessControl gets here: fail closed.
        msg = f"{request.method} {request.url.path} was reached without authentication"
        raise AuthError(msg)
    return principal


def routed_as_authorized(request: Request) -> None:
    """Fail closed unless the route that runs is the one :class:`AccessControl` checked.

    Every route of the app depends on this. The middleware picks the route
    as the router does; should the two ever disagree (or the middleware be
    missing), the request is refused rather than run under another route's rule.
    """
    if request.scope.get("route") is not request.scope.get(AUTHORIZED_ROUTE, _NOTHING):
        msg = (
            f"{request.method} {request.url.path} was not authorized for the route that answers it"
        )
        raise ForbiddenError(msg)


Caller = Annotated[Principal, Depends(caller)]


def check_function_topics(principal: Principal, config: FunctionConfig) -> None:
    """Raise :class:`ForbiddenError` if a tenant admin's function names another tenant's topic."""
    tenant = principal.tenant
    if principal.is_superuser or tenant is None:
        return
    named = [("inputs", topic) for topic in config.inputs] + [
        ("output", config.output),
        ("log_topic", config.log_topic),
        ("dead_letter_topic", config.dead_letter_topic),
    ]
    for field, topic in named:
        if topic is not None and TopicName.parse(topic, field=field).tenant != tenant:
            msg = (
                f"function {config.fqfn}: {field} {topic} is outside tenant {tenant!r}; "
                f"{principal.describe()} may use its own tenant's topics only"
            )
            raise ForbiddenError(msg)
    check_topics_pattern(principal, f"function {config.fqfn}", config.topics_pattern)


def check_topics_pattern(principal: Principal, owner: str, pattern: str | None) -> None:
    """Raise :class:`ForbiddenError` unless a tenant admin's ``pattern`` stays in its tenant.

    The one check of every route that takes a ``topics_pattern`` (functions
    and sinks, create and update). Discovery lists only the pattern's
    namespace (:class:`~sparkfn.config.topics_pattern.TopicsPattern`), so
    this refuses what could never be read anyway, saying so at create rather
    than reading less than was asked: the namespace must be the caller's
    tenant's, and every alternative of the regex must start with it.
    """
    tenant = principal.tenant
    if pattern is None or principal.is_superuser or tenant is None:
        return
    parsed = TopicsPattern.parse(pattern)
    if parsed.tenant != tenant or not parsed.confined():
        msg = (
            f"{owner}: topics_pattern {pattern!r} could match topics outside tenant "
            f"{tenant!r}; {principal.describe()} writes a pattern that starts with "
            f"{tenant}/<namespace>/ in every alternative"
        )
        raise ForbiddenError(msg)


def check_package_reference(principal: Principal, reference: str, field: str) -> None:
    """Raise :class:`ForbiddenError` unless a tenant admin names a package it may use.

    A digest (``sha256:<hex>``) names content, which only who has it (or a
    function of it) knows. A path is a name anyone can guess, so a tenant
    admin's paths live under its tenant: ``acme/...``.
    """
    if reference.startswith(DIGEST_PREFIX) or owns_package_path(principal, reference):
        return
    msg = (
        f"{field} {reference!r}: {principal.describe()} names packages by their "
        f"sha256: digest or by a path under its tenant, {principal.tenant}/..."
    )
    raise ForbiddenError(msg)


def owns_package_path(principal: Principal, path: str) -> bool:
    """Whether ``principal`` may use the package upload path ``path`` (a tenant admin's: ``T/...``)."""
    return principal.is_superuser or path.startswith(f"{principal.tenant}/")


def install_auth(app: FastAPI, keys: TokenKeys | None) -> None:
    """Put :class:`AccessControl` in front of ``app``'s routes, checking tokens with ``keys``.

    ``keys`` is None when auth is off (the worker's settings decide, above
    this room). Call it before the app serves; routes included afterwards are
    covered too.
    """
    docs = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    public = PUBLIC_PATHS | {path for path in docs if path}
    app.add_middleware(AccessControl, routes=app.router.routes, keys=keys, public=public)


def app_dependencies(*, auth_enabled: bool) -> list[Any]:
    """Dependencies of every route: :func:`routed_as_authorized`, and the bearer scheme.

    The scheme (when auth is on) only documents the header in OpenAPI: the
    middleware checked the token before the route was reached.
    """
    dependencies = [Depends(routed_as_authorized)]
    if auth_enabled:
        scheme = HTTPBearer(
            auto_error=False,
            bearerFormat="JWT",
            description="A token from `sparkfn tokens create` (HS256 or RS256, exp required).",
        )
        dependencies.append(Depends(scheme))
    return dependencies


AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No token, or it expired or does not verify."},
    403: {"model": ErrorBody, "description": "The token's role may not use this route."},
}
