"""The import direction of DESIGN.md: lower layers never import higher ones."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "mlenergy"

# Lower number = lower layer. A module may import its own package and any lower layer.
LAYER = {
    "testing": 6,
    "leaderboard": 5,
    "studies": 4,
    "errors": 0,
    "progress": 0,
    "records": 1,
    "measure": 2,
    "models": 2,
    "store": 2,
    "estimate": 2,
    "workloads": 3,
    "quality": 3,
    "optimize": 3,
    "analysis": 3,
    "commands": 5,
    "cli": 5,
}
# Agreed exceptions (see DESIGN.md / issue notes): the estimator reads architectures from
# configs with the same pure-Python parser that counts parameters, and describes models for
# its records (estimates, the reference measurements) with the one ModelInfo builder.
ALLOWED_SAME_LAYER = {("estimate", "models.architecture"), ("estimate", "models.info")}
FORBIDDEN_THIRD_PARTY = {
    "records": {"torch", "transformers", "zeus", "gradio"},
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


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        yield rel.parts[0].removesuffix(".py"), path


def test_namespace_package_layout():
    assert not (PKG / "__init__.py").exists(), "mlenergy must stay a PEP 420 namespace package"
    for reserved in ("benchmark", "data"):
        assert not (PKG / reserved).exists(), f"mlenergy.{reserved} belongs to ML.ENERGY"


@pytest.mark.parametrize("area,path", list(_modules()), ids=lambda v: str(v))
def test_imports_point_down(area, path):
    assert area in LAYER, f"new top-level module mlenergy.{area}: add it to LAYER"
    for name in _imports(path):
        top = name.split(".")[0]
        if top == "mlenergy":
            parts = name.split(".")
            if len(parts) < 2:
                continue
            target = parts[1]
            assert target in LAYER, f"{path}: unknown mlenergy.{target}"
            if target == area:
                continue
            sub = ".".join(parts[1:3])
            ok = LAYER[target] < LAYER[area] or (area, sub) in ALLOWED_SAME_LAYER
            if LAYER[target] == LAYER[area] and LAYER[area] >= 3:
                ok = True  # upper tiers may share siblings (e.g. workloads <-> quality)
            assert ok, (
                f"{path.relative_to(ROOT)} imports {name}: layer {target} is not below {area}"
            )
        else:
            banned = FORBIDDEN_THIRD_PARTY.get(area, set())
            assert top not in banned, f"{path.relative_to(ROOT)} must not import {top}"
