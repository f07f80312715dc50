"""A worker refuses a function whose subscription another function reads: 409 ``subscription_in_use``.

The real app, served by uvicorn in this process, over a real store. No
Spark: the refusal comes before the code is loaded or anything starts, and
the function already there is registered without being started.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from sparkfn.api.errors import SubscriptionInUseError
from sparkfn.config.connector import SinkConfig
from sparkfn.config.function import FunctionConfig
from sparkfn.topics import subscription
from sparkfn.worker.http import status_of
from sparkfn.worker.registry import registry_key
from sparkfn.worker.service import Worker

FUNCTIONS = "/admin/v3/functions/public/default"


def _registered(worker: Worker, name: str, **more: Any) -> FunctionConfig:
    config = FunctionConfig.build(name=name, py="f.py", inputs=["in"], output="out", **more)
    worker.registry.create(config, package_digest=None, who="test")
    return config


def _send(client: httpx.Client, verb: str, name: str, **fields: Any) -> httpx.Response:
    body = {"className": "m.f", "inputs": ["in"], "output": "out", **fields}
    return client.request(verb, f"{FUNCTIONS}/{name}", data={"functionConfig": json.dumps(body)})


def _refused(response: httpx.Response) -> str:
    assert response.status_code == 409, response.text
    body = response.json()
    assert body["reason"] == "subscription_in_use", body
    return str(body["message"])


def test_a_function_reading_another_functions_subscription_is_refused(
    worker: Worker, client: httpx.Client
) -> None:
    _registered(worker, "a")  # its subscription: its FQFN, Pulsar's default
    message = _refused(_send(client, "POST", "b", subscriptionName="public/default/a"))
    assert message == (
        "subscription public/default/a: read by function public/default/a; function "
        "public/default/b cannot share it (give it another subscription_name)"
    )
    assert client.get(f"{FUNCTIONS}/b").status_code == 404  # nothing was kept

    _registered(worker, "c", subscription_name="shared")
    assert "read by function public/default/c" in _refused(
        _send(client, "POST", "d", subscriptionName="shared")
    )


def test_an_update_onto_another_functions_subscription_is_refused(
    worker: Worker, client: httpx.Client
) -> None:
    a = _registered(worker, "a", subscription_name="shared")
    _registered(worker, "b")
    assert "function public/default/b cannot share it" in _refused(
        _send(client, "PUT", "b", subscriptionName="shared")
    )
    assert worker.registry.get("public/default/b").version == 1
    worker.registry.check_subscription_free(a)  # a function's own subscription is its own


def test_a_subscription_another_run_owns_in_the_store_is_refused(
    worker: Worker, client: httpx.Client
) -> None:
    """A ``localrun`` of another function (not registered here) read it first."""
    with worker.open_store().write() as conn:
        subscription.claim(conn, "shared", "sink:public/default/archive")
    assert "read by sink public/default/archive" in _refused(
        _send(client, "POST", "b", subscriptionName="shared")
    )


def test_the_error_maps_to_409_though_it_is_a_config_error() -> None:
    assert status_of(SubscriptionInUseError("x")) == 409


def test_a_default_subscription_is_the_registry_key_the_check_reads_it_as() -> None:
    """``Registry.check_subscription_free`` reads the others' subscriptions from their stored
    JSON: ``subscription_name``, else the registry key, which is each model's default."""
    function = FunctionConfig.build(name="f", py="f.py", inputs=["in"], output="out")
    sink = SinkConfig.build(name="s", sink_type="file", inputs=["in"], configs={"path": "/x"})
    assert function.subscription == registry_key("function", function.fqfn)
    assert sink.subscription == registry_key("sink", sink.fqn)
