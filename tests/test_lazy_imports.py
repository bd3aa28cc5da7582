"""Imports inside functions: heavy third-party stacks only; our own modules only with a reason.

A module says what it depends on in its imports at the top. An import inside a function
hides that, so outside ``mlenergy/commands/`` and ``mlenergy/cli.py`` (where every command
imports the library inside its function, to keep ``mlenergy --help`` fast) it is kept for:

* a heavy third-party stack (:data:`HEAVY`), which a module imports only where it is used;
* anything else, our own modules included, only with a ``# lazy: <reason>`` comment on the
  line above (one comment covers a run of consecutive imports). The reason names the stack the
  import defers (e.g. one of our modules that imports torch at module level) or the cost.

The number of in-function imports of our own modules is capped (:data:`OWN_LAZY_MAX`): a new
one fails here until the cap is raised in review. ``docs/architecture.md`` states the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "mlenergy"

HEAVY = {
    # The deep-learning stack: torch alone takes ~5 s to import on 2 CPU cores.
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "accelerate",
    "huggingface_hub",
    "safetensors",
    # The web UI and its servers (gradio ~13 s); only the leaderboard and serving need them.
    "gradio",
    "gradio_client",
    "fastapi",
    "starlette",
    "uvicorn",
    # Sweeps on a cluster (~8 s), plots (~0.8 s), the serving client (~0.9 s).
    "ray",
    "matplotlib",
    "plotly",
    "aiohttp",
    # GPU counters: zeus.monitor takes ~5 s, and NVML/AMD SMI exist only on GPU machines.
    "zeus",
    "pynvml",
    "amdsmi",
    # JIT compilation (numba ~1.3 s plus compiling) and the pipeline planner's graph solver.
    "numba",
    "networkx",
    "lowtime",
    # Optional extras: lm-eval, the notebook kernel, the browser and notebook test drivers.
    "lm_eval",
    "IPython",
    "ipywidgets",
    "playwright",
    "nbclient",
    "nbformat",
    # The data stack (0.5-1.4 s each): commands that read no table (`mlenergy --help`,
    # `reference`, `estimate --help`, a sweep's dry run) must not pay for them.
    "pandas",
    "duckdb",
    "pyarrow",
    "scipy",
}
"""Third-party packages a function may import where it uses them, and why each is heavy."""

OWN_LAZY_MAX = 11
"""In-function imports of our own modules (each with a ``# lazy:`` reason) outside commands/."""

UNMARKED = {
    ("mlenergy/optimize/candidates.py", "mlenergy.reference.gpus"),
    ("mlenergy/optimize/candidates.py", "mlenergy.reference.measurements"),
    ("mlenergy/optimize/candidates.py", "mlenergy.store"),
    ("mlenergy/optimize/candidates.py", "mlenergy.estimate"),
    ("mlenergy/optimize/frontier.py", "mlenergy.optimize.fast_solver"),
    ("mlenergy/optimize/frontier.py", "mlenergy.optimize.pipeline_dag"),
    ("mlenergy/optimize/pipeline.py", "mlenergy.optimize.plots"),
}
"""In-function imports of our own modules still without a ``# lazy:`` reason (the pipeline
planner's modules); each should move to the top or gain a reason. The set only shrinks."""


def _exempt(rel: Path) -> bool:
    return rel.parts[:2] == ("mlenergy", "commands") or rel == Path("mlenergy/cli.py")


def in_function_imports(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, module, has_reason)`` of each import statement inside a function of ``path``."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found: list[tuple[int, str, bool]] = []

    def reason_above(line: int) -> bool:
        above = lines[line - 2].strip() if line >= 2 else ""
        return above.startswith("# lazy:") and len(above) > len("# lazy:") + 3

    def scan(body: list[ast.stmt], in_function: bool) -> None:
        run_start = None
        previous_end = None
        for stmt in body:
            is_import = isinstance(stmt, (ast.Import, ast.ImportFrom))
            if is_import and in_function:
                if run_start is None or previous_end != stmt.lineno - 1:
                    run_start = stmt.lineno
                names = (
                    [a.name for a in stmt.names]
                    if isinstance(stmt, ast.Import)
                    else ["." * stmt.level + (stmt.module or "")]
                )
                same_line = "# lazy:" in lines[stmt.lineno - 1]
                for name in names:
                    found.append((stmt.lineno, name, same_line or reason_above(run_start)))
                previous_end = stmt.end_lineno
            else:
                run_start = previous_end = None
            inner = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
            for field in ("body", "orelse", "finalbody"):
                scan(getattr(stmt, field, []) or [], in_function or inner)
            for handler in getattr(stmt, "handlers", []) or []:
                scan(handler.body, in_function or inner)
            for case in getattr(stmt, "cases", []) or []:
                scan(case.body, in_function or inner)

    scan(ast.parse(text).body, False)
    return found


def _all_in_function_imports() -> list[tuple[str, int, str, bool]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if not _exempt(rel):
            out += [(str(rel), line, name, ok) for line, name, ok in in_function_imports(path)]
    return out


def test_the_scanner_sees_reasons_runs_and_nested_blocks(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "import os\n"
        "def f():\n"
        "    # lazy: torch through our model loader\n"
        "    from mlenergy.models import load_model\n"
        "    from mlenergy.store import RunStore\n"
        "\n"
        "    import json\n"
        "    if True:\n"
        "        import torch\n"
        "    try:\n"
        "        import yaml  # lazy: the plan reader only\n"
        "    except ImportError:\n"
        "        pass\n"
    )
    assert in_function_imports(source) == [
        (4, "mlenergy.models", True),
        (5, "mlenergy.store", True),
        (7, "json", False),
        (9, "torch", False),
        (11, "yaml", True),
    ]


def test_in_function_imports_are_heavy_or_give_a_reason():
    problems = []
    for rel, line, name, has_reason in _all_in_function_imports():
        own = name.startswith(("mlenergy", "."))
        if has_reason or (rel, name) in UNMARKED:
            continue
        if not own and name.split(".")[0] in HEAVY:
            continue
        what = "our own module" if own else "a light module"
        problems.append(f"{rel}:{line} imports {name} ({what}) inside a function")
    assert not problems, (
        "import it at the top of the module, or say why not on the line above with "
        "'# lazy: <reason>':\n" + "\n".join(problems)
    )


def test_in_function_imports_of_our_own_modules_do_not_grow():
    own = [
        (rel, line, name)
        for rel, line, name, _ in _all_in_function_imports()
        if name.startswith(("mlenergy", ".")) and (rel, name) not in UNMARKED
    ]
    listing = "\n".join(f"{rel}:{line} {name}" for rel, line, name in own)
    assert len(own) <= OWN_LAZY_MAX, (
        f"{len(own)} in-function imports of our own modules (at most {OWN_LAZY_MAX}); import "
        f"them at the top (no circle: tests/test_layering.py) unless they defer a heavy "
        f"stack:\n{listing}"
    )
    assert own, "the scan finds the known lazy imports"
