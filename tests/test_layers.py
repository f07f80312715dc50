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


def _is_module(name: str) -> bool:
    path = SRC.joinpath(*name.split(".")[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


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
                # ``from package import module`` depends on that module, not the package
                for alias in node.names:
                    name = f"{node.module}.{alias.name}"
                    targets.add(name if _is_module(name) else node.module)
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


# The runtime's rooms, lower first: a module may import only its own room and those
# before it. ``lifecycle`` holds two rooms: the records every participant shares
# (control, objects, the worker-side control thread) sit below the queries that
# read them, the supervisors that drive queries and groups sit above them.
RUNTIME_ROOMS: list[tuple[str, ...]] = [
    ("spark",),
    ("stats", "metrics_store"),
    ("function",),
    (
        "lifecycle.states",
        "lifecycle.causes",
        "lifecycle.policy",
        "lifecycle.control",
        "lifecycle.objects",
        "lifecycle.workerctl",
    ),
    ("query",),
    (
        "lifecycle.target",
        "lifecycle.lookout",
        "lifecycle.query_target",
        "lifecycle.parking",
        "lifecycle.poison",
        "lifecycle.supervisor",
    ),
    ("group",),
    ("lifecycle.function", "lifecycle"),
    ("status", "prometheus", "purge", "localrun"),
]


def _room(module: str) -> int | None:
    """The index of ``module``'s room in :data:`RUNTIME_ROOMS` (longest prefix wins)."""
    if not module.startswith("sparkfn.runtime."):
        return None
    rest = module.removeprefix("sparkfn.runtime.")
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(RUNTIME_ROOMS):
        for prefix in prefixes:
            if (rest == prefix or rest.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[1]
            ):
                best = (index, len(prefix))
    return None if best is None else best[0]


def test_every_runtime_module_has_a_room() -> None:
    homeless = [m for m in _imports() if m.startswith("sparkfn.runtime.") and _room(m) is None]
    assert homeless == []


def test_runtime_rooms_import_only_rooms_below_them() -> None:
    upward = []
    for module, targets in sorted(_imports().items()):
        source = _room(module)
        if source is None:
            continue
        for target in sorted(targets):
            room = _room(target)
            if room is not None and room > source:
                upward.append(f"{module} -> {target}")
    assert upward == []
