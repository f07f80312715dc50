"""Run the real ``sparkfn`` command in a child process, with a chosen store in its env."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cli_forks import SERVER

# A child process is a cold start; a few seconds is normal on a busy machine.
RUN_TIMEOUT = 120.0


@dataclass(frozen=True)
class Result:
    """What one run of the command printed and returned."""

    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        """Non-empty stdout lines."""
        return [line for line in self.stdout.splitlines() if line.strip()]

    def describe(self) -> str:
        return (
            f"sparkfn {' '.join(self.args)} exited {self.code}\n"
            f"--- stdout\n{self.stdout}--- stderr\n{self.stderr}"
        )


def _reset_sigint() -> None:
    # A child started from a non-interactive shell may inherit SIGINT as
    # ignored, and Python then never raises KeyboardInterrupt. A terminal
    # delivers Ctrl+C with the default disposition: recreate that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Cli:
    """The ``sparkfn`` command, run as ``python -m sparkfn.cli.main`` with a fixed env."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def command(self, args: Sequence[str]) -> list[str]:
        return [sys.executable, "-m", "sparkfn.cli.main", *args]

    def run(self, *args: str, stdin: bytes | None = None, timeout: float = RUN_TIMEOUT) -> Result:
        """Run the command to its end, in a process of its own forked from one that
        imported it (``cli_forks.py``: what runs is the same, without a cold import)."""
        if type(self).command is not Cli.command:  # another program than sparkfn's main
            return self._run_cold(args, stdin, timeout)
        code, out, err = SERVER.run(list(args), self.env, stdin, timeout)
        return Result(
            tuple(args),
            code,
            out.decode("utf-8", errors="replace"),
            err.decode("utf-8", errors="replace"),
        )

    def _run_cold(self, args: Sequence[str], stdin: bytes | None, timeout: float) -> Result:
        done = subprocess.run(
            self.command(args),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )
        return Result(
            tuple(args),
            done.returncode,
            done.stdout.decode("utf-8", errors="replace"),
            done.stderr.decode("utf-8", errors="replace"),
        )

    def ok(self, *args: str, stdin: bytes | None = None) -> Result:
        """Run and require exit code 0."""
        result = self.run(*args, stdin=stdin)
        assert result.code == 0, result.describe()
        assert "Traceback" not in result.stderr, result.describe()
        return result

    def fail(self, *args: str, stdin: bytes | None = None) -> Result:
        """Run and require a failure reported as one ``error [...]`` line, no traceback."""
        result = self.run(*args, stdin=stdin)
        assert result.code != 0, result.describe()
        assert "Traceback" not in result.stdout + result.stderr, result.describe()
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.describe()
        assert lines[0].startswith("error ["), result.describe()
        return result

    def popen(self, *args: str, **kwargs: object) -> subprocess.Popen[bytes]:
        """Start the command without waiting; the caller must end it."""
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            self.command(args),
            env=self.env,
            preexec_fn=_reset_sigint,
            **kwargs,
        )


def cli_env(data_dir: Path, store_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
    env["SPARKFN_DATA_DIR"] = str(data_dir)
    if store_url is not None:
        env["SPARKFN_STORE_URL"] = store_url
    # Wide enough that table cells are not wrapped, so tests can find them.
    env["COLUMNS"] = "200"
    return env
