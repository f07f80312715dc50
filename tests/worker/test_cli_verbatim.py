"""The CLI prints users' data as it is: no Rich markup, no emoji codes.

A state value ``:four:`` printed as 4️⃣, or ``[red]x[/red]`` printed as a red
``x``, would show the user something the worker does not hold. Each command
runs as a user runs it, in a child process, against the worker's REST app
served over HTTP (the function is registered without being run: no Spark).
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from cli_forks import run_sparkfn

from sparkfn.config.function import FunctionConfig
from sparkfn.worker.service import Worker

# Each is what Rich would turn into something else: an emoji, a style, a link.
TRICKY = (":four:", "[red]x[/red]", "4:four:prev=x", "[link=http://x]y[/link]")


def _sparkfn(env: dict[str, str], *args: str) -> str:
    ran = run_sparkfn(args, env, 120)  # forked from a warm server: tests/cli/cli_forks.py
    assert ran.returncode == 0 and not ran.stderr.startswith("error"), (
        f"sparkfn {' '.join(args)} exited {ran.returncode}\n{ran.stdout}{ran.stderr}"
    )
    return ran.stdout


@pytest.fixture
def env(client: httpx.Client, data_dir: Path, store_url: str) -> dict[str, str]:
    """The CLI pointed at the served worker and at its store."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
    return base | {
        "SPARKFN_URL": str(client.base_url),
        "SPARKFN_DATA_DIR": str(data_dir),
        "SPARKFN_STORE_URL": store_url,
        "COLUMNS": "200",
    }


def test_state_config_and_messages_are_printed_verbatim(
    worker: Worker, env: dict[str, str]
) -> None:
    config = FunctionConfig.build(
        name="verbatim",
        py="examples/exclamation.py",
        inputs=["in"],
        user_config={"greeting": "[red]x[/red] :four:"},
    )
    worker.registry.create(config, package_digest=None, who="alice")
    target = ("--name", "verbatim")

    for number, value in enumerate(TRICKY):
        key = f"k{number}:four:"
        stored = _sparkfn(env, "functions", "putstate", *target, "--key", key, "--value", value)
        assert stored == f'stored {key} = "{value}"\n'
        shown = _sparkfn(env, "functions", "querystate", *target, "--key", key, "-o", "table")
        assert shown == f'{key} = "{value}"\n'

    got = _sparkfn(env, "functions", "get", *target)
    assert "[red]x[/red] :four:" in got

    _sparkfn(env, "topics", "create", "verbatim-topic")
    produced = [arg for value in TRICKY for arg in ("-m", value)]
    _sparkfn(env, "topics", "produce", "verbatim-topic", *produced, "--key", "[b]k:four:")
    consumed = _sparkfn(env, "topics", "consume", "verbatim-topic")
    for value in (*TRICKY, "[b]k:four:"):
        assert f"│ {value} " in consumed, consumed
