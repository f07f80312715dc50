"""A REST body that contradicts its path is refused, not overridden by it (issue 28, point 8).

The real app over HTTP on both stores; nothing here starts a function, so no Spark.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from sparkfn.config.function import FunctionConfig
from sparkfn.state.store import get_state
from sparkfn.worker.service import Worker

FUNCTION = "/admin/v3/functions/public/default/f"


def _refused(response: httpx.Response, status: int, reason: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["reason"] == reason, body
    return str(body["message"])


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"name": "g"}, "name 'g' in the functionConfig differs from the path's 'f'"),
        (
            {"tenant": "acme"},
            "tenant 'acme' in the functionConfig differs from the path's 'public'",
        ),
        (
            {"namespace": "ops"},
            "namespace 'ops' in the functionConfig differs from the path's 'default'",
        ),
        ({"fqfn": "public/default/g"}, "name 'g' in the functionConfig differs from the path's"),
    ],
)
def test_a_body_naming_another_function_than_the_path_is_refused(
    worker: Worker, client: httpx.Client, given: dict[str, Any], says: str
) -> None:
    config = json.dumps({"inputs": ["in"], "className": "m.f", **given})
    for verb in ("POST", "PUT"):
        if verb == "PUT":  # an update of a registered function, not refused for being absent
            registered = FunctionConfig.build(name="f", classname="m.f", inputs=["in"])
            worker.registry.create(registered, package_digest=None, who="test")
        response = client.request(verb, FUNCTION, data={"functionConfig": config})
        message = _refused(response, 400, "invalid_config")
        assert message.startswith("function public/default/f: "), message
        assert says in message
    assert worker.registry.get("public/default/f").version == 1


def test_the_same_names_in_body_and_path_are_accepted(worker: Worker, client: httpx.Client) -> None:
    config = {"inputs": ["in"], "className": "m.f", "tenant": "public", "namespace": "default"}
    response = client.post(FUNCTION, data={"functionConfig": json.dumps({**config, "name": "f"})})
    # Past the names: refused for its code (no module m; topics are made on first use).
    assert "No module named 'm'" in _refused(response, 400, "function_load_error")


def test_a_state_whose_key_differs_from_the_paths_is_refused(
    worker: Worker, client: httpx.Client
) -> None:
    registered = FunctionConfig.build(name="f", classname="m.f", inputs=["in"])
    worker.registry.create(registered, package_digest=None, who="test")
    state = json.dumps({"key": "other", "stringValue": "x"})
    response = client.post(f"{FUNCTION}/state/last", data={"state": state})
    message = _refused(response, 400, "invalid_config")
    assert "key 'other' in the state differs from the path's key 'last'" in message
    store = worker.open_store()
    assert get_state(store, "public/default/f", "last") is None
    assert get_state(store, "public/default/f", "other") is None
    same = json.dumps({"key": "last", "stringValue": "x"})
    stored = client.post(f"{FUNCTION}/state/last", data={"state": same})
    assert stored.status_code == 200, stored.text
    assert stored.json()["stringValue"] == "x"


def test_binary_state_goes_in_and_out_as_base64_bytes(worker: Worker, client: httpx.Client) -> None:
    # Pulsar's FunctionState: byteValue is base64 of the bytes. putstate stored the base64
    # text itself, and querystate on a value that is no UTF-8 was an HTTP 500.
    registered = FunctionConfig.build(name="f", classname="m.f", inputs=["in"])
    worker.registry.create(registered, package_digest=None, who="test")
    raw = b"\xff\x00\xfe binary"
    state = json.dumps({"key": "blob", "byteValue": base64.b64encode(raw).decode()})
    stored = client.post(f"{FUNCTION}/state/blob", data={"state": state})
    assert stored.status_code == 200, stored.text
    found = get_state(worker.open_store(), "public/default/f", "blob")
    assert found is not None and found.value == raw
    queried = client.get(f"{FUNCTION}/state/blob")
    assert queried.status_code == 200, queried.text
    assert queried.json()["byteValue"] == base64.b64encode(raw).decode()
    assert queried.json()["stringValue"] is None
    bad = json.dumps({"key": "blob", "byteValue": "not base64!"})
    message = _refused(
        client.post(f"{FUNCTION}/state/blob", data={"state": bad}), 400, "invalid_config"
    )
    assert "byteValue must be base64" in message
