"""The parameter types every route takes its names and numbers as: checked at the edge.

A route declares ``tenant: Tenant`` or ``version: Version`` instead of
``str`` or ``int``; FastAPI then refuses a value outside the type's bounds
with a 400 ``invalid_request`` naming the parameter and the value found
(:func:`sparkfn.worker.http.install_error_handlers`), before the route runs.
So no name that could never be registered reaches the store, and no number
reaches it that its column cannot hold (SQLite's ``OverflowError`` and
PostgreSQL's ``numeric_value_out_of_range`` were 500s). The bounds are in
the served OpenAPI document, where clients and schemathesis read them.

The types carry pydantic constraints, not ``Path()`` or ``Query()``, so one
type serves wherever the parameter is: ``instance_id`` is in the path of
``/{name}/{instance_id}/start`` and in the query of ``/{name}/start``.

>>> from sparkfn.worker.api.params import MAX_INT32
>>> MAX_INT32
2147483647
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from sparkfn.config.names import NAME_PATTERN

MAX_INT32 = 2**31 - 1
"""The largest version, instance id or offset: the store keeps them in 32-bit columns."""

MAX_INT64 = 2**63 - 1
"""The largest counter a function's state keeps (a 64-bit column)."""

MAX_STATE_KEY = 1024
"""The longest state key: the store's ``function_state.key`` column."""

_NAME_RULE = "letters, digits, '_', '-', '.', starting with a letter or digit, at most 128"

Tenant = Annotated[
    str, StringConstraints(pattern=NAME_PATTERN), Field(description=f"A tenant: {_NAME_RULE}.")
]
Namespace = Annotated[
    str, StringConstraints(pattern=NAME_PATTERN), Field(description=f"A namespace: {_NAME_RULE}.")
]
Name = Annotated[
    str,
    StringConstraints(pattern=NAME_PATTERN),
    Field(description=f"A function's, source's or sink's name: {_NAME_RULE}."),
]
Topic = Annotated[
    str, StringConstraints(pattern=NAME_PATTERN), Field(description=f"A topic: {_NAME_RULE}.")
]
StateKey = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_STATE_KEY),
    Field(description="A key of the function's state."),
]
InstanceId = Annotated[int, Field(ge=0, le=MAX_INT32, description="0 is the first instance.")]
VersionNumber = Annotated[int, Field(ge=1, le=MAX_INT32, description="1 is the first version.")]
Offset = Annotated[int, Field(ge=0, le=MAX_INT32, description="How many items to skip.")]
Counter = Annotated[int, Field(ge=-MAX_INT64 - 1, le=MAX_INT64)]
