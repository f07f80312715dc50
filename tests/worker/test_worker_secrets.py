"""A sink's secret is never shown (REST, CLI, errors) and stays stored across an update that
sends the mask back; what the worker process writes is its user's only.

The shared worker process (started as ``sparkfn worker start``), a real Redis
on loopback, the CLI in a child process.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import httpx
import pytest
from brokers import require, unique
from cli_forks import run_sparkfn
from sqlalchemy import select
from worker_process import SharedWorker

from sparkfn.config.connector import SinkConfig
from sparkfn.store import registry_schema, schema
from sparkfn.store.store import Store
from sparkfn.worker.registry import Registry

PASSWORD = "hunter2-never-shown"
API_KEY = "api-key-never-shown"
MASK = "********"  # sparkfn.config.secrets.MASK, spelled out: what a client sees
NAME = "vault"


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
    return run_sparkfn(args, {**env, "SPARKFN_URL": url, "COLUMNS": "200"}, 180)  # forked


@pytest.mark.backend("sqlite")
def test_a_sink_password_is_masked_everywhere_and_an_update_keeps_it(
    shared_worker: SharedWorker,
) -> None:
    require("redis")
    configs = {"redisHosts": "127.0.0.1:6379", "redisPassword": PASSWORD}
    config = {
        "inputs": [unique("vault-in")],
        "sinkType": "redis",
        "configs": {**configs, "streamName": unique("vault")},
        "secrets": {"apiKey": API_KEY},  # a clear-text provider hands these out as they are
    }
    path = f"/admin/v3/sinks/public/default/{NAME}"
    with httpx.Client(base_url=shared_worker.url, timeout=120) as client:
        created = client.post(path, files={"sinkConfig": (None, json.dumps(config))})
        assert created.status_code == 200, created.text
        got = client.get(path)
    for answer in (created, got):
        assert answer.json()["configs"]["redisPassword"] == MASK
        assert answer.json()["secrets"] == {"apiKey": MASK}
        assert PASSWORD not in answer.text
        assert API_KEY not in answer.text

    shown = _cli(shared_worker.url, "sinks", "get", "--name", NAME)
    assert shown.returncode == 0, shown.stderr
    assert MASK in shown.stdout
    assert PASSWORD not in shown.stdout + shown.stderr

    # The CLI reads the config back (masked) and sends it whole with the change.
    updated = _cli(shared_worker.url, "sinks", "update", "--name", NAME, "--parallelism", "2")
    assert updated.returncode == 0, updated.stderr
    assert PASSWORD not in updated.stdout + updated.stderr
    latest = Registry(shared_worker.store, SinkConfig).get(f"public/default/{NAME}")
    assert latest.version == 2
    assert latest.config.parallelism == 2
    assert latest.config.configs["redisPassword"] == PASSWORD  # not the mask
    assert latest.config.secrets == {"apiKey": API_KEY}
    for row in _stored_rows(shared_worker.store, f"sink:public/default/{NAME}"):
        assert PASSWORD not in row and API_KEY not in row  # sealed at rest

    wrong_config = {**config, "configs": {**config["configs"], "redisPassword": 7}}
    with httpx.Client(base_url=shared_worker.url, timeout=120) as client:
        wrong = client.put(
            path,
            files={"sinkConfig": (None, json.dumps(wrong_config))},
        )
    assert wrong.status_code == 400, wrong.text
    assert "configs.redisPassword" in wrong.json()["message"]
    assert "7)" not in wrong.json()["message"]  # a bad secret is not echoed either
    assert PASSWORD not in shared_worker.process.output()


@pytest.mark.backend("sqlite")
def test_the_worker_process_keeps_what_it_writes_private(shared_worker: SharedWorker) -> None:
    with httpx.Client(base_url=shared_worker.url, timeout=120) as client:
        uploaded = client.post(
            "/admin/v3/functions/upload",
            files={"data": ("private_code.py", b"def process(x, ctx):\n    return x\n")},
            data={"path": unique("private/code") + ".py"},
        )
    assert uploaded.status_code == 200, uploaded.text
    data_dir = shared_worker.data_dir
    written = list(data_dir.rglob("private_code.py"))
    assert written, f"no uploaded file under {data_dir}"
    for path in [data_dir, data_dir / "sparkfn.db", *written, *(p.parent for p in written)]:
        mode = stat.S_IMODE(Path(path).stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}: group or others may read it"


SECRET = "s3cret-user-never-shown"
GREET = """
def process(input, context):
    return context.get_secret("username") + "!"
"""


def _stored_rows(store: Store, fqfn: str) -> list[str]:
    """The config column of every stored version of ``fqfn``, as the store holds it."""
    table = registry_schema.function_versions
    with store.read() as conn:
        return list(conn.execute(select(table.c.config).where(table.c.fqfn == fqfn)).scalars())


@pytest.mark.long_running(60)
def test_a_function_secret_is_sealed_at_rest_masked_in_get_and_reaches_its_run(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    code = tmp_path / "greet.py"
    code.write_text(GREET)
    functions = "/admin/v3/functions/public/default"
    config = {
        "inputs": [unique("greet-in")],
        "output": unique("greet-out"),
        "subscriptionPosition": "Earliest",
        "secrets": {"username": SECRET},
        "secretsProviderClassName": "ClearTextSecretsProvider",
    }
    with httpx.Client(base_url=shared_worker.url, timeout=300) as client:
        with code.open("rb") as package:
            registered = client.post(
                f"{functions}/greet",
                data={"functionConfig": json.dumps(config)},
                files={"data": ("greet.py", package, "text/x-python")},
            )
        assert registered.status_code == 200, registered.text
        got = client.get(f"{functions}/greet")
        for answer in (registered, got):
            assert answer.json()["secrets"] == {"username": MASK}
            assert SECRET not in answer.text

        rows = _stored_rows(shared_worker.store, "public/default/greet")
        assert len(rows) == 1 and SECRET not in rows[0]
        assert json.loads(rows[0])["secrets"]["username"].startswith("sparkfn-sealed:v1:")

        # The run opens it: the function's output carries the secret itself.
        answer = client.post(f"{functions}/greet/trigger", data={"data": "x", "timeout": 240})
        assert answer.status_code == 200, answer.text
        assert answer.json()["output"]["value"] == SECRET + "!"
        members = schema.group_members  # the run's query group keeps a copy of the config
        with shared_worker.store.read() as conn:
            specs = conn.execute(
                select(members.c.spec).where(members.c.control_id == "public/default/greet")
            ).scalars()
            assert [SECRET in spec for spec in specs] == [False]

        # An update that sends back what get showed (the mask) keeps the secret.
        shown = client.get(f"{functions}/greet").json()
        again = {**config, "secrets": shown["secrets"], "userConfig": {"v": 2}}
        updated = client.put(f"{functions}/greet", data={"functionConfig": json.dumps(again)})
        assert updated.status_code == 200, updated.text
        assert updated.json()["secrets"] == {"username": MASK}
    latest = Registry(shared_worker.store).get("public/default/greet")
    assert latest.version == 2
    assert latest.config.secrets == {"username": SECRET}
    assert all(
        SECRET not in row for row in _stored_rows(shared_worker.store, "public/default/greet")
    )

    shown_cli = _cli(shared_worker.url, "functions", "get", "--name", "greet")
    assert shown_cli.returncode == 0, shown_cli.stderr
    assert SECRET not in shown_cli.stdout + shown_cli.stderr
