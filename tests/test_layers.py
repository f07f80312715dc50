"""The package's rooms: arrows point down only, in every folder; no folder or module cycle.

Reads every module's imports (module level and inside functions) with ast,
so a lazy upward import is caught too. Imports under ``if TYPE_CHECKING:``
are for type hints only: they count for the rooms (a room does not name what
sits above it, not even in a hint), but not for the module cycles (a cycle of
hints never runs).

No folder reaches itself through its siblings either (a folder cycle), even
where two of them share a room: :func:`_folder_cycles`.

Every folder that holds folders lists its rooms in :data:`ROOMS`, lower first;
a module may import its own room and the rooms before it. A package's
``__init__`` speaks for its whole folder: it may import any of its rooms, and
importing it from inside counts as importing its top room. The root package
``sparkfn`` loads each public name on first use, so ``import sparkfn`` (for
``__version__``) imports no room.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "sparkfn"

# Each folder's rooms, lower first. A room is one or more of the folder's
# modules or sub-folders, written by their names in it.
ROOMS: dict[str, list[tuple[str, ...]]] = {
    "sparkfn": [
        ("api",),
        ("_closing", "config"),
        ("store",),
        ("topics",),
        ("state",),
        ("_usercode",),
        ("runtime",),
        ("testing", "_compat"),
        ("connectors",),
        ("worker",),
        ("cli",),
    ],
    "sparkfn.runtime": [
        ("spark",),
        ("stats",),
        ("metrics_store",),
        ("function",),
        ("lifecycle",),
        ("query",),
        ("group",),
        ("status", "prometheus", "purge"),
        ("function_run",),
    ],
    # the topic log and its clients, then the Spark data source over them
    "sparkfn.topics": [
        (
            "admin",
            "append",
            "at_exit",
            "autocreate",
            "batching",
            "consumer",
            "discovery",
            "garbage",
            "log",
            "maintenance",
            "message",
            "message_future",
            "plans",
            "prefetch",
            "producer",
            "reading",
            "received",
            "schema_type",
            "segments",
            "subscription",
        ),
        ("spark",),
    ],
    # the connectors themselves, what the runners share, then the runners; the
    # sink adapter last, at the path every stored sink config names
    "sparkfn.connectors": [
        ("builtin",),
        ("appender", "catalog", "registry"),
        ("source", "sink"),
        ("sink_runtime",),
    ],
    # the cluster, the errors every HTTP layer answers with, who may call, the
    # service with its runs, the packages it is given, and the REST API on top
    "sparkfn.worker": [
        ("cluster",),
        ("http",),
        ("auth",),
        (
            "settings",
            "registry",
            "session",
            "recovery",
            "preparing",
            "runs",
            "placement",
            "versions",
            "tenants",
            "assigned",
            "cluster_work",
            "service",
        ),
        ("packages",),
        ("api",),
    ],
    "sparkfn._compat.pulsar": [("schema",), ("functions",)],
}


def _is_module(name: str) -> bool:
    path = SRC.joinpath(*name.split(".")[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(*, hints: bool) -> dict[str, set[str]]:
    """Each module's imports of sparkfn modules; with ``hints``, those under ``TYPE_CHECKING`` too."""
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
            if id(node) in typing_only and not hints:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from package import module`` depends on that module, not the package
                for alias in node.names:
                    name = f"{node.module}.{alias.name}"
                    targets.add(name if _is_module(name) else node.module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        found[module] = {t for t in targets if t.startswith("sparkfn.")}
    return found


def _packages() -> list[str]:
    return sorted(
        ".".join(("sparkfn", *init.parent.relative_to(SRC).parts))
        for init in SRC.rglob("__init__.py")
    )


def _room(folder: str, module: str) -> int | None:
    """The index of ``module``'s room among ``folder``'s; the top room for the folder itself."""
    if module == folder:
        return len(ROOMS[folder]) - 1
    if not module.startswith(folder + "."):
        return None
    name = module.removeprefix(folder + ".").split(".")[0]
    return next((i for i, room in enumerate(ROOMS[folder]) if name in room), None)


def _children(folder: str) -> set[str]:
    path = SRC.joinpath(*folder.split(".")[1:])
    modules = {p.stem for p in path.glob("*.py") if p.name != "__init__.py"}
    return modules | {
        p.relative_to(path).parts[0] for p in path.glob("*/**/*.py")
    }  # namespace folders too


def _upward(imports: dict[str, set[str]]) -> list[str]:
    """Every import of a room above the importer's own, in any folder of :data:`ROOMS`."""
    upward = []
    for module, targets in sorted(imports.items()):
        for folder in ROOMS:
            source = None if module == folder else _room(folder, module)
            if source is None:
                continue  # outside the folder, or the folder's own __init__
            for target in sorted(targets):
                room = _room(folder, target)
                if room is not None and room > source:
                    upward.append(f"{module} -> {target} (rooms of {folder})")
    return upward


def _module_cycles(imports: dict[str, set[str]]) -> list[str]:
    """The modules that reach themselves through their imports."""

    def reaches_itself(start: str) -> bool:
        stack, seen = [start], set()
        while stack:
            for nxt in imports.get(stack.pop(), set()):
                if nxt == start:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    return sorted(module for module in imports if reaches_itself(module))


def _unit(folder: str, module: str) -> str:
    """``module``'s child of ``folder`` (a module or a sub-folder): its unit there."""
    return module.removeprefix(folder + ".").split(".")[0]


def _folder_cycles(imports: dict[str, set[str]]) -> list[str]:
    """Every ring of a folder's children (modules and sub-folders) with a sub-folder in it.

    An import counts in the folder where importer and imported part ways,
    between their children there: ``worker.auth.access`` importing
    ``worker.settings`` is ``auth -> settings`` in ``sparkfn.worker``. A folder
    that reaches itself so is a folder cycle, whatever :data:`ROOMS` says
    (a ring of modules alone is :func:`_module_cycles`' to find). A package's
    own ``__init__`` speaks for its folder and is left out, as for the rooms.
    """
    edges: dict[str, dict[str, set[str]]] = {}
    for module, targets in imports.items():
        for target in targets:
            a, b = module.split("."), target.split(".")
            common = 0
            while common < min(len(a), len(b)) and a[common] == b[common]:
                common += 1
            folder = ".".join(a[:common])
            if common in (len(a), len(b)) or not _is_package(folder):
                continue  # one contains the other: a package's __init__
            edges.setdefault(folder, {}).setdefault(a[common], set()).add(b[common])
    cycles = []
    for folder, graph in sorted(edges.items()):
        for start in sorted(graph):
            if not _is_package(f"{folder}.{start}"):
                continue
            stack, seen = [(start, [start])], {start}
            while stack:
                node, path = stack.pop()
                for nxt in sorted(graph.get(node, set())):
                    if nxt == start:
                        cycles.append(f"{folder}: {' -> '.join([*path, start])}")
                    elif nxt not in seen:
                        seen.add(nxt)
                        stack.append((nxt, [*path, nxt]))
    return cycles


def _is_package(name: str) -> bool:
    return SRC.joinpath(*name.split(".")[1:], "__init__.py").is_file()


def test_every_folder_with_folders_has_rooms() -> None:
    with_folders = [p for p in _packages() if any(q.startswith(p + ".") for q in _packages())]
    assert sorted(set(with_folders) - set(ROOMS)) == []


def test_every_module_and_folder_has_a_room() -> None:
    homeless = [
        f"{folder}.{name}"
        for folder in ROOMS
        for name in sorted(_children(folder))
        if not any(name in room for room in ROOMS[folder])
    ]
    assert homeless == []


def test_rooms_name_only_what_is_there() -> None:
    stale = [
        f"{folder}.{name}"
        for folder, rooms in ROOMS.items()
        for room in rooms
        for name in room
        if name not in _children(folder)
    ]
    assert stale == []


def test_no_room_imports_a_room_above_it() -> None:
    assert _upward(_imports(hints=True)) == []


def test_no_module_import_cycle() -> None:
    assert _module_cycles(_imports(hints=False)) == []


def test_an_upward_import_is_caught_in_every_folder() -> None:
    """The check itself: a planted import of each folder's top room from its bottom room fails."""
    imports = _imports(hints=True)
    for folder, rooms in ROOMS.items():
        low = next(m for m in imports if _room(folder, m) == 0 and m != folder)
        high = next(m for m in imports if _room(folder, m) == len(rooms) - 1 and m != folder)
        planted = {**imports, low: imports[low] | {high}}
        assert f"{low} -> {high} (rooms of {folder})" in _upward(planted), folder


def test_no_folder_cycle() -> None:
    assert _folder_cycles(_imports(hints=True)) == []


def test_a_folder_cycle_is_caught() -> None:
    """The check itself: the worker's auth importing its API, which imports auth, is a ring."""
    imports = _imports(hints=True)
    low, high = "sparkfn.worker.auth.tokens", "sparkfn.worker.api.app"
    planted = {**imports, low: imports[low] | {high}}
    assert "sparkfn.worker: auth -> api -> auth" in _folder_cycles(planted)
    assert f"{low} -> {high} (rooms of sparkfn.worker)" in _upward(planted)
