"""A Pulsar function with its Pulsar YAML runs under ``sparkfn functions localrun`` on Spark.

The function is Pulsar's classic exclamation (``from pulsar import Function``),
its config file as a Pulsar user keeps it (camelCase, ``runtime: PYTHON``,
``autoAck: true``, resources, ...), its topics created with sparkfn's
defaults, and the command line a ``pulsar-admin functions localrun`` one, with
no flag of sparkfn's. A child process with its own JVM, as a user runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import Cli
from test_functions_cli import _run_spark

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin

REPO = Path(__file__).resolve().parents[2]
EXCLAMATION = REPO / "tests" / "examples" / "pulsar_funcs" / "classic_exclamation.py"

PULSAR_YAML = f"""\
tenant: public
namespace: default
name: exclamation
className: classic_exclamation.ClassicExclamation
py: {EXCLAMATION}
inputs:
  - persistent://public/default/sentences
output: persistent://public/default/exclaimed
logTopic: persistent://public/default/exclamation-log
runtime: PYTHON
autoAck: true
processingGuarantees: ATLEAST_ONCE
subscriptionPosition: Earliest
subName: exclamation-sub
parallelism: 1
retainOrdering: false
retainKeyOrdering: false
forwardSourceMessageProperty: true
cleanupSubscription: true
userConfig: {{}}
resources:
  cpu: 1.0
  ram: 1073741824
  disk: 10737418240
timeoutMs: 10000
maxPendingAsyncRequests: 1000
exposePulsarAdminClientEnabled: false
"""


@pytest.mark.slow
@pytest.mark.long_running(40)
def test_a_pulsar_function_and_its_yaml_run_as_they_are(cli: Cli, tmp_path: Path) -> None:
    for topic in ("sentences", "exclaimed", "exclamation-log"):
        cli.ok("topics", "create", topic)  # sparkfn's defaults: bytes, one partition
    cli.ok("topics", "produce", "sentences", "--file", "-", stdin=b"hello\npulsar\n")
    config = tmp_path / "exclamation.yaml"
    config.write_text(PULSAR_YAML)

    done = _run_spark(
        cli,
        "--function-config-file", str(config),
        "--broker-service-url", "pulsar://localhost:6650",
        "--until-drained",
        "--json-status",
        "--spark-master", "local[1]",
    )  # fmt: skip

    described = f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
    assert done.returncode == 0, described
    warned = [
        line.split(": ")[1] for line in done.stderr.splitlines() if line.startswith("warning: ")
    ]
    assert sorted(warned) == sorted(
        [
            "runtime",
            "maxPendingAsyncRequests",
            "exposePulsarAdminClientEnabled",
            "resources.disk",
            "--broker-service-url",
        ]
    ), described
    [status_line] = [line for line in done.stdout.splitlines() if line.strip()]
    instance = json.loads(status_line)["instances"][0]["status"]
    assert (instance["numReceived"], instance["numSuccessfullyProcessed"]) == (2, 2), described
    assert instance["numUserExceptions"] == 0, described

    consumed = cli.ok("topics", "consume", "exclaimed", "--json", "--position", "earliest")
    values = [json.loads(line)["value"] for line in consumed.lines]  # UTF-8 bytes: as text
    assert values == ["hello!", "pulsar!"]
    # The subscription is Pulsar's subName, moved past both messages.
    store = Store.open(data_dir=cli.env["SPARKFN_DATA_DIR"])
    try:
        assert TopicAdmin(store).subscriptions("sentences") == {"exclamation-sub": {0: 2}}
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.long_running(40)
def test_pulsars_user_exception_is_negative_acked_not_dead_lettered(cli: Cli) -> None:
    """Pulsar's user_exception under ``localrun`` with Pulsar's flags and no retry flag:
    the message fails, is negative-acked (it waits in the retry topic to be delivered
    again, without end, as in Pulsar), never dead-lettered; the drain still ends, and its
    last words say where the message waits (issue 38, point 1)."""
    failing = REPO / "tests" / "examples" / "pulsar_funcs" / "always_fails.py"
    cli.ok("topics", "create", "doomed")
    cli.ok("topics", "produce", "doomed", "-m", "x")
    done = _run_spark(
        cli,
        "--py", str(failing), "--classname", "always_fails.AlwaysFails",
        "--tenant", "public", "--namespace", "default", "--name", "user-exception",
        "--inputs", "persistent://public/default/doomed",
        "--output", "persistent://public/default/never",
        "--subs-position", "Earliest", "--until-drained", "--json-status",
        "--spark-master", "local[1]",
    )  # fmt: skip

    described = f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
    assert done.returncode == 0, described
    assert "wait in topic public/default/user-exception-RETRY" in done.stderr, described
    [status_line] = [line for line in done.stdout.splitlines() if line.strip()]
    instance = json.loads(status_line)["instances"][0]["status"]
    assert (instance["numUserExceptions"], instance["numDeadLettered"]) == (1, 0), described
    store = Store.open(data_dir=cli.env["SPARKFN_DATA_DIR"])
    try:
        admin = TopicAdmin(store)
        assert not admin.exists("public/default/user-exception-DLQ")
        assert admin.exists("public/default/user-exception-RETRY")
    finally:
        store.close()
