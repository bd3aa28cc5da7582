"""The suite's worker layout (tests/conftest.py) names every file that uses a shared fixture."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _shared_session_fixtures() -> dict[str, tuple[str, ...]]:
    """``SHARED_SESSION_FIXTURES`` of tests/conftest.py (loaded by path: every folder of the
    suite has a module named ``conftest``)."""
    spec = importlib.util.spec_from_file_location("suite_conftest", TESTS / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SHARED_SESSION_FIXTURES


def _uses(node: ast.AST, fixture: str) -> bool:
    """Whether ``node`` is a function taking ``fixture`` or a ``usefixtures`` mark naming it."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return fixture in {a.arg for a in node.args.args}
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    named = {a.value for a in node.args if isinstance(a, ast.Constant)}
    return node.func.attr == "usefixtures" and fixture in named


def _files_using(fixture: str) -> set[str]:
    """Test files with a function (test or fixture) that takes ``fixture`` as an argument, or
    a ``pytest.mark.usefixtures`` naming it."""
    found = set()
    for path in TESTS.rglob("test_*.py"):
        if any(_uses(node, fixture) for node in ast.walk(ast.parse(path.read_text("utf-8")))):
            found.add(path.relative_to(TESTS.parent).as_posix())
    return found


@pytest.mark.slow
def test_every_file_that_uses_a_shared_session_fixture_is_listed():
    shared = _shared_session_fixtures()
    assert shared
    for fixture, files in shared.items():
        assert _files_using(fixture) == set(files), fixture
