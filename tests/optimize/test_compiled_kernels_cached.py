"""Every numba kernel is compiled once per machine: ``cache=True`` on each decorator.

Without it each new process compiles the planner's kernels again (tens of seconds before the
first plan; docs/reduce.md gives the first-run and later times).
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "mlenergy"
COMPILERS = {"njit", "jit", "vectorize", "guvectorize", "generated_jit"}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _kernels() -> list[tuple[str, ast.expr]]:
    found = []
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "numba" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef):
                for deco in node.decorator_list:
                    target = deco.func if isinstance(deco, ast.Call) else deco
                    if _name(target) in COMPILERS:
                        found.append((f"{path.relative_to(PKG)}:{node.name}", deco))
    return found


def test_every_compiled_kernel_is_cached_on_disk():
    kernels = _kernels()
    assert len(kernels) >= 3  # the planner's kernels are found
    uncached = [
        where
        for where, deco in kernels
        if not (
            isinstance(deco, ast.Call)
            and any(
                k.arg == "cache" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in deco.keywords
            )
        )
    ]
    assert not uncached, f"compiled without cache=True: {uncached}"
