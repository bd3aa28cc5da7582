"""Each command only parses, calls the library and prints: short functions, honest imports.

Every function in ``mlenergy/commands/`` is at most 60 lines (``def`` to its last line, the
signature included: options belong in typed groups, :mod:`mlenergy.commands.typed`). Imports
inside functions of ``mlenergy/commands/`` and ``mlenergy/cli.py`` load a heavy stack only:
torch, transformers, gradio, ray or matplotlib, or one of our modules that imports one of them
(checked below, so the list cannot go stale).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ROOT / "mlenergy" / "commands"
MAX_LINES = 60
PIPELINE = (
    "the pipeline command is being rewritten with the planner's energy accountings; its options "
    "become a typed group and its imports move up after that"
)
LONGER = {"optimize.py:pipeline": PIPELINE}
"""Functions allowed over the limit, with the reason (each must still be over it)."""
INNER_IMPORTS = {"optimize.py:pipeline": PIPELINE}
"""Functions allowed light imports inside, with the reason (each must still have one)."""
HEAVY = ("torch", "transformers", "gradio", "ray", "matplotlib")
"""Third-party stacks a command imports only when it runs."""
HEAVY_OWN = {
    "mlenergy.leaderboard.app": "gradio",
    "mlenergy.leaderboard.export": "gradio",
    "mlenergy.optimize.pipeline": "matplotlib",
    "mlenergy.optimize.plots": "matplotlib",
}
"""Our modules that import a heavy stack (the stack named) when they are imported."""


def _sources() -> list[Path]:
    return [*sorted(COMMANDS.glob("*.py")), ROOT / "mlenergy" / "cli.py"]


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text())
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _length(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    assert fn.end_lineno is not None
    return fn.end_lineno - fn.lineno + 1


def test_no_command_function_is_over_60_lines():
    long = {
        f"{path.name}:{fn.name}": _length(fn)
        for path in sorted(COMMANDS.glob("*.py"))
        for fn in _functions(path)
        if _length(fn) > MAX_LINES
    }
    assert sorted(set(long) - set(LONGER)) == [], f"over {MAX_LINES} lines: {long}"
    stale = sorted(set(LONGER) - set(long))
    assert stale == [], f"back under {MAX_LINES} lines: drop {stale} from LONGER"


def test_the_length_rule_sees_a_long_function(tmp_path):
    path = tmp_path / "long.py"
    path.write_text("def f():\n" + "    x = 1\n" * MAX_LINES)
    assert [_length(fn) for fn in _functions(path)] == [MAX_LINES + 1]


def _inner_imports(path: Path) -> list[tuple[str, str]]:
    """(function, imported module) of every import inside a function of ``path``."""
    out = []
    for fn in _functions(path):
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                out += [(fn.name, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                out += [(fn.name, f"{base}.{alias.name}") for alias in node.names]
    return out


def _heavy(module: str) -> bool:
    """Whether ``module`` (``a.b`` or ``a.b.name`` of ``from a.b import name``) is heavy."""
    if module.split(".")[0] in HEAVY:
        return True
    return any(module == m or module.startswith(m + ".") for m in HEAVY_OWN)


def test_the_import_rule_tells_heavy_from_light():
    assert _heavy("matplotlib.pyplot") and _heavy("mlenergy.optimize.pipeline.plan_pipeline")
    assert not _heavy("mlenergy.store.RunStore") and not _heavy("pandas")


def test_imports_inside_command_functions_load_heavy_stacks_only():
    light = {
        (f"{path.name}:{fn}", module)
        for path in _sources()
        for fn, module in _inner_imports(path)
        if not _heavy(module)
    }
    assert sorted(f"{fn} imports {m}" for fn, m in light if fn not in INNER_IMPORTS) == []
    stale = sorted(set(INNER_IMPORTS) - {fn for fn, _ in light})
    assert stale == [], f"no light import inside {stale} any more: drop them from INNER_IMPORTS"


_ASKS_FOR = """
import importlib, sys


class Stop(ImportError):
    pass


class Block:
    asked = False

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {stack!r}:
            Block.asked = True
            raise Stop(name)
        return None


sys.meta_path.insert(0, Block())
try:
    importlib.import_module({module!r})
except Stop:
    pass
print(Block.asked)
"""
"""Whether importing ``module`` asks for ``stack``: the import is stopped there, not paid for."""


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(HEAVY_OWN))
def test_heavy_own_modules_load_their_stack(module):
    stack = HEAVY_OWN[module]
    code = _ASKS_FOR.format(module=module, stack=stack)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True", f"{module} no longer loads {stack}: import it at the top"


def test_the_stack_rule_sees_a_module_that_does_not_load_it():
    code = _ASKS_FOR.format(module="mlenergy.errors", stack="matplotlib")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
