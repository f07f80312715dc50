"""The localrun display's closing lines, without Spark."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from sparkfn.api.lifecycle import RunState
from sparkfn.api.status import FunctionInstanceStatus, FunctionInstanceStatusData, FunctionStatus
from sparkfn.cli.progress import progress_display
from sparkfn.config.function import FunctionConfig


def _status(dead: int, failed: int | None = None) -> FunctionStatus:
    instance = FunctionInstanceStatusData(
        state=RunState.STOPPED,
        num_received=3,
        num_successfully_processed=3 - dead,
        num_user_exceptions=dead if failed is None else failed,
        num_dead_lettered=dead,
        average_latency=1.0,
    )
    return FunctionStatus(
        name="public/default/upper",
        num_instances=1,
        instances=[FunctionInstanceStatus(instance_id=0, status=instance)],
    )


@pytest.mark.parametrize("terminal", [False, True])
def test_the_summary_names_the_dead_letter_topic_that_holds_failed_messages(
    terminal: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    config = FunctionConfig.build(name="upper", py="f.py", inputs=["words"], max_message_retries=1)
    console = Console(file=io.StringIO(), force_terminal=terminal)
    progress_display(console, config).close(_status(dead=1))
    assert "1 failed message(s) are in topic public/default/upper-DLQ" in capsys.readouterr().err


def test_the_summary_says_where_messages_wait_when_retries_are_unset(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = FunctionConfig.build(name="upper", py="f.py", inputs=["words"])
    progress_display(Console(file=io.StringIO()), config).close(_status(dead=0, failed=2))
    said = capsys.readouterr().err
    assert "failed messages wait in topic public/default/upper-RETRY" in said
    assert "upper-DLQ" not in said


def test_nothing_is_said_of_dead_letters_when_none_failed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = FunctionConfig.build(name="upper", py="f.py", inputs=["words"])
    progress_display(Console(file=io.StringIO()), config).close(_status(dead=0))
    assert "failed message" not in capsys.readouterr().err
