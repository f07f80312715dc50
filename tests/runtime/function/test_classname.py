"""A classname without a dot names a module whose ``process`` is the function (Pulsar's rule)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkfn import FunctionConfig, FunctionLoadError
from sparkfn.runtime.function.loader import load_function


def config(py: Path | None, classname: str) -> FunctionConfig:
    return FunctionConfig.build(
        name="f", py=None if py is None else str(py), classname=classname, inputs=["in"]
    )


def test_a_module_name_calls_the_modules_process(tmp_path: Path) -> None:
    py = tmp_path / "bang_module.py"
    py.write_text("def process(input):\n    return input + '!'\n")
    loaded = load_function(config(py, "bang_module"))
    assert (loaded.call("hi"), loaded.takes_context, loaded.obj) == ("hi!", False, None)


def test_a_name_inside_the_file_still_wins_over_the_module(tmp_path: Path) -> None:
    py = tmp_path / "twice_module.py"
    py.write_text(
        "def process(input):\n    return 'module'\n\n"
        "def twice_module(input):\n    return input * 2\n"
    )
    assert load_function(config(py, "twice_module")).call("ab") == "abab"


def test_an_importable_module_without_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "path_module.py").write_text("def process(input, context):\n    return input\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded = load_function(config(None, "path_module"))
    assert loaded.takes_context


def test_a_module_with_neither_process_nor_the_name_says_so(tmp_path: Path) -> None:
    py = tmp_path / "empty_module.py"
    py.write_text("def helper(x):\n    return x\n")
    with pytest.raises(
        FunctionLoadError,
        match=r"classname 'empty_module' names module empty_module, which defines neither "
        r"process\(\) nor 'empty_module' \(it defines: helper\)",
    ):
        load_function(config(py, "empty_module"))
    with pytest.raises(FunctionLoadError, match="importing module 'no_such_module' failed"):
        load_function(config(None, "no_such_module"))
