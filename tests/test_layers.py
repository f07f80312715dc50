"""The package's layers: arrows point down only, and no import cycle among them.

Reads every module's imports (module level and inside functions) with ast,
so a lazy upward import is caught too; imports under ``if TYPE_CHECKING:``
are for type hints only and are not dependencies.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "sparkfn"

# Lower layers first; a layer may import only itself and those before it.
LAYERS = ["api", "config", "store", "topics", "state", "runtime", "connectors", "worker", "cli"]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "sparkfn" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else None


def _imports() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        module = ".".join(("sparkfn", *path.relative_to(SRC).with_suffix("").parts))
        module = module.removesuffix(".__init__")
        targets: set[str] = set()
        tree = ast.parse(path.read_text())
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue  # imports for type hints only: no runtime dependency
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.add(node.module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        found[module] = {t for t in targets if t.startswith("sparkfn.")}
    return found


def test_no_layer_imports_a_layer_above_it() -> None:
    upward = []
    for module, targets in sorted(_imports().items()):
        source = _layer(module)
        if source is None:
            continue
        for target in sorted(targets):
            layer = _layer(target)
            if layer is not None and LAYERS.index(layer) > LAYERS.index(source):
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_no_import_cycle_between_layers() -> None:
    edges: dict[str, set[str]] = {layer: set() for layer in LAYERS}
    for module, targets in _imports().items():
        source = _layer(module)
        for target in targets:
            layer = _layer(target)
            if source and layer and layer != source:
                edges[source].add(layer)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in edges[start] - seen:
            if nxt == goal or reaches(nxt, goal, seen | {nxt}):
                return True
        return False

    assert [layer for layer in LAYERS if reaches(layer, layer, set())] == []


def test_runtime_modules_do_not_import_each_other_in_a_cycle() -> None:
    imports = _imports()
    runtime = {m: {t for t in ts if t.startswith("sparkfn.runtime")} for m, ts in imports.items()}

    def cycle_from(start: str) -> bool:
        stack, seen = [start], set()
        while stack:
            for nxt in runtime.get(stack.pop(), set()):
                if nxt == start:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    assert sorted(m for m in runtime if m.startswith("sparkfn.runtime") and cycle_from(m)) == []
