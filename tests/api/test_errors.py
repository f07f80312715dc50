"""The error tree: one module, one root, one unique ``reason`` per class."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import sparkfn
from sparkfn.api import errors
from sparkfn.api.errors import SparkfnError

SRC = Path(sparkfn.__file__).resolve().parent
ERRORS_MODULE = SRC / "api" / "errors.py"
ERRORS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")


def _tree(root: type[SparkfnError]) -> list[type[SparkfnError]]:
    found = [root]
    for sub in root.__subclasses__():
        found.extend(_tree(sub))
    return found


ALL = _tree(SparkfnError)


def test_every_class_has_its_own_unique_snake_case_reason() -> None:
    seen: dict[str, str] = {}
    for cls in ALL:
        # Declared on the class itself: an inherited reason would be a duplicate.
        reason = cls.__dict__.get("reason")
        assert isinstance(reason, str), f"{cls.__name__} does not declare its own reason"
        assert SNAKE_CASE.match(reason), f"{cls.__name__}.reason {reason!r} is not snake_case"
        assert reason not in seen, f"{cls.__name__} and {seen[reason]} share reason {reason!r}"
        seen[reason] = cls.__name__
    assert len(seen) >= 10


@pytest.mark.parametrize("cls", ALL[1:], ids=lambda cls: cls.__name__)
def test_every_class_is_also_a_builtin_error(cls: type[SparkfnError]) -> None:
    builtin_bases = [
        base
        for base in cls.__mro__
        if base.__module__ == "builtins" and base not in (Exception, BaseException, object)
    ]
    assert builtin_bases, f"{cls.__name__} should also inherit a builtin such as ValueError"


def test_every_class_lives_in_the_errors_module_is_drawn_and_exported() -> None:
    page = ERRORS_PAGE.read_text()
    tree = page[page.index("## The tree") : page.index("## Every reason")]
    table = page[page.index("## Every reason") :]
    for cls in ALL:
        assert cls.__module__ == "sparkfn.api.errors", cls
        assert re.search(rf"\b{cls.__name__}\b", tree), f"{cls.__name__} is missing from the tree"
        row = f"| `{cls.__name__}` | `{cls.__dict__['reason']}` |"
        assert row in table, f"docs/errors.md has no row {row!r}"
        assert getattr(sparkfn, cls.__name__) is cls
        assert cls.__name__ in sparkfn.__all__


def test_no_error_class_is_defined_outside_the_errors_module() -> None:
    """A static scan, so modules that import pyspark need not be loaded."""
    names = {cls.__name__ for cls in ALL}
    stray = []
    for path in sorted(SRC.rglob("*.py")):
        if path == ERRORS_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases}
            if bases & names or node.name in names:
                stray.append(f"{path.relative_to(SRC)}: class {node.name}")
    assert stray == []


def test_a_builtin_handler_still_catches_a_sparkfn_error() -> None:
    with pytest.raises(LookupError) as caught:
        raise errors.TopicNotFoundError("topic public/default/nope does not exist")
    assert caught.value.reason == "topic_not_found"
    assert isinstance(caught.value, SparkfnError)
    assert issubclass(errors.FunctionLoadError, ValueError)
