"""The import direction of the layout: lower layers never import higher ones, and no circles.

Every package and top-level module of ``mlenergy/`` has a layer, and so do the two folders
outside it that hold code: ``leaderboard/`` (the Space entry point) and ``benchmarks/``
(performance scripts). The table lists only what exists, except the packages in ``PLANNED``,
which are being built now and get their place in advance. A module may sit above its package
(``MODULE_LAYER``); its package's other modules then never import it.

Within a layer, modules import each other in one direction too: the graph of imports between
modules of ``mlenergy/`` has no circle. Every import of one of our modules counts, wherever it
is written: at module level, inside a function (it runs later, but the module still needs the
other), and under ``if TYPE_CHECKING:`` (the annotation still names the other module's type).
Two modules that need each other's types share a module below both.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "mlenergy"

# Lower number = lower layer. A module may import its own package and any lower layer.
LAYER = {
    "errors": 0,
    "dataclass_fields": 0,
    "footprint": 1,
    "progress": 0,
    "strict_json": 1,
    "records": 1,
    "reference": 1,
    "measure": 2,
    "models": 2,
    "store": 2,
    "estimate": 2,
    # Fitting and validating the estimator (the fit, cross-validation, the accuracy report) is
    # a job apart from estimating: it uses the estimator, so it sits above it. The measurements
    # it fits are read in reference (MODULE_LAYER below), as the planners read them.
    "calibrate": 3,
    "workloads": 3,
    "quality": 3,
    "optimize": 3,
    "analysis": 3,
    "importers": 4,
    "studies": 4,
    "sweep": 4,
    "leaderboard": 5,
    "notebook": 5,
    "commands": 5,
    "cli": 5,
    "testing": 6,
}
# Modules whose layer is not their package's, by dotted name under mlenergy. The reference
# package (data, the GPU catalog, the precision vocabulary) sits at the bottom with records;
# its two readers of ML.ENERGY's measurements describe each model with the estimator's config
# rule and each GPU with the catalog, so they sit above the estimator, beside analysis and
# optimize. The package itself never imports them (a lower layer), nor does the estimator.
MODULE_LAYER = {
    "reference.runs": 3,
    "reference.measurements": 3,
}
# Packages whose layer is fixed in LAYER before their folder exists. A name here whose folder
# exists fails the test below, so the set holds only packages still to come.
PLANNED: set[str] = set()
# Folders outside the package: entry points and scripts, above every layer (they may import
# any of it, test support included); nothing imports them.
OUTSIDE = {"leaderboard/": ROOT / "leaderboard", "benchmarks/": ROOT / "benchmarks"}
OUTSIDE_LAYER = 7
NOT_IMPORTABLE = {"leaderboard", "benchmarks", "tests"}
"""Top-level names of this repository that code under ``mlenergy/`` never imports."""
# Agreed exceptions: the estimator reads architectures from configs with the same
# pure-Python parser that counts parameters (no torch, no transformers), and describes models
# for its records (estimates, the reference measurements) with the one ModelInfo builder.
# Carbon and cost (footprint) read the shipped grid intensity table from the reference folder.
ALLOWED_SAME_LAYER = {
    ("footprint", "reference"),
    ("estimate", "models.architecture"),
    ("estimate", "models.parameters"),
    ("estimate", "models.info"),
}
FORBIDDEN_THIRD_PARTY = {
    "records": {"torch", "transformers", "zeus", "gradio"},
    "reference": {"torch", "transformers", "zeus", "gradio", "pandas", "numpy"},
    "measure": {"transformers", "gradio"},
    "store": {"torch", "transformers", "gradio"},
    "estimate": {"torch", "transformers", "gradio"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _module_name(path: Path) -> str:
    """The dotted name of a file under ``mlenergy/`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def own_import_graph() -> dict[str, dict[str, int]]:
    """Every module of ``mlenergy/`` -> the modules of ours it imports, with a line of each.

    ``from mlenergy.a import b`` names module ``mlenergy.a.b`` when that is a module, else
    ``mlenergy.a``; imports at module level, in functions and under ``TYPE_CHECKING`` all count.
    """
    files = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in files:
                return ".".join(parts[:end])
        return None

    graph: dict[str, dict[str, int]] = {}
    for module, path in files.items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [resolve(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    resolve(f"{node.module}.{a.name}") or resolve(node.module) for a in node.names
                ]
            else:
                continue
            for target in targets:
                if target is not None and target != module:
                    edges.setdefault(target, node.lineno)
        graph[module] = edges
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _area(parts: list[str]) -> str:
    """The layer table's key of a dotted module name under mlenergy (its package, or itself)."""
    sub = ".".join(parts[:2])
    return sub if sub in MODULE_LAYER else parts[0]


def _layer(area: str) -> int:
    return MODULE_LAYER.get(area, LAYER.get(area.split(".")[0], -1))


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("")
        yield _area(list(rel.parts)), path


def _outside_modules():
    for area, folder in OUTSIDE.items():
        for path in sorted(folder.rglob("*.py")):
            yield area, path


def _exists(name: str) -> bool:
    return (PKG / name).is_dir() or (PKG / f"{name}.py").is_file()


def test_namespace_package_layout():
    assert not (PKG / "__init__.py").exists(), "mlenergy must stay a PEP 420 namespace package"
    for reserved in ("benchmark", "data"):
        assert not (PKG / reserved).exists(), f"mlenergy.{reserved} belongs to ML.ENERGY"


def test_layer_table_lists_only_what_exists():
    missing = sorted(name for name in LAYER if name not in PLANNED and not _exists(name))
    assert not missing, f"LAYER lists mlenergy.{missing} but there is no such package or module"
    landed = sorted(name for name in PLANNED if _exists(name))
    assert not landed, f"mlenergy.{landed} exist now: remove them from PLANNED"
    assert LAYER.keys() >= PLANNED, "every planned package needs its layer in LAYER"
    for area, folder in OUTSIDE.items():
        assert folder.is_dir() and any(folder.rglob("*.py")), f"{area} holds no code"
    for name in MODULE_LAYER:
        assert (PKG / f"{name.replace('.', '/')}.py").is_file(), f"MODULE_LAYER lists {name}"


def _check_import(area: str, layer: int, path: Path, name: str) -> None:
    parts = name.split(".")
    if parts[0] != "mlenergy":
        banned = FORBIDDEN_THIRD_PARTY.get(area, set())
        assert parts[0] not in banned, f"{path.relative_to(ROOT)} must not import {parts[0]}"
        return
    if len(parts) < 2:
        return
    package = parts[1]
    assert package in LAYER, f"{path.relative_to(ROOT)}: unknown mlenergy.{package}"
    assert package not in PLANNED or _exists(package), (
        f"{path.relative_to(ROOT)} imports mlenergy.{package}, which does not exist yet"
    )
    target = _area(parts[1:])
    if target == area and layer != OUTSIDE_LAYER:
        return
    if target.split(".")[0] == area.split(".")[0] and _layer(target) <= layer:
        return  # within one package, down to (or level with) the module's own layer
    sub = ".".join(parts[1:3])
    ok = _layer(target) < layer or (area, sub) in ALLOWED_SAME_LAYER
    if _layer(target) == layer and layer >= 3:
        ok = True  # upper tiers may share siblings (e.g. workloads <-> quality)
    assert ok, f"{path.relative_to(ROOT)} imports {name}: layer {target} is not below {area}"


@pytest.mark.parametrize("area,path", list(_modules()), ids=lambda v: str(v))
def test_imports_point_down(area, path):
    assert area.split(".")[0] in LAYER, f"new top-level module mlenergy.{area}: add it to LAYER"
    for name in _imports(path):
        top = name.split(".")[0]
        assert top not in NOT_IMPORTABLE, f"{path.relative_to(ROOT)} imports {top}/"
        _check_import(area, _layer(area), path, name)


@pytest.mark.parametrize("area,path", list(_outside_modules()), ids=lambda v: str(v))
def test_entry_points_and_benchmarks_import_the_package_only(area, path):
    for name in _imports(path):
        top = name.split(".")[0]
        assert top not in NOT_IMPORTABLE - {area.rstrip("/")}, (
            f"{path.relative_to(ROOT)} imports {top}/"
        )
        _check_import(area, OUTSIDE_LAYER, path, name)


def test_circles_finds_a_two_module_circle_and_nothing_else():
    graph = {"a": {"b": 3}, "b": {"a": 7}, "c": {"a": 1}, "d": {}}
    assert circles(graph) == [["a", "b"]]
    assert circles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}) == [["a", "b", "c"]]
    assert circles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_circles():
    graph = own_import_graph()
    assert len(graph) > 200 and graph["mlenergy.records.metrics"], "the graph reads imports"
    problems = []
    for part in circles(graph):
        edges = [f"{a} -> {b} (line {graph[a][b]})" for a in part for b in part if b in graph[a]]
        problems.append("; ".join(edges))
    assert not problems, "import circles (move the shared types down):\n" + "\n".join(problems)
