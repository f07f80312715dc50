"""A data directory that cannot be used is one error line naming it, never a traceback."""

from __future__ import annotations

from pathlib import Path

from cli_runner import Cli, cli_env


def test_an_uncreatable_data_dir_is_one_line_naming_it(data_dir: Path) -> None:
    cli = Cli(cli_env(data_dir))
    result = cli.fail("--data-dir", "/proc/forbidden", "topics", "list")
    assert result.stderr.strip() == (
        "error [data_dir_unusable]: data directory /proc/forbidden cannot be created: "
        "No such file or directory"
    )


def test_a_file_as_data_dir_is_one_line_naming_it(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "plain-file"
    not_a_dir.write_text("")
    result = Cli(cli_env(not_a_dir)).fail("topics", "create", "orders")
    assert result.stderr.strip() == (
        f"error [data_dir_unusable]: data directory {not_a_dir} is not a directory"
    )
