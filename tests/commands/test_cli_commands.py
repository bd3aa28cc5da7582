"""The command table of ``mlenergy``: every command listed, each loaded only when used."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

import mlenergy.commands
from mlenergy.cli import COMMANDS, load_command, main

ROOT = Path(__file__).resolve().parents[2]


def _registered() -> dict[str, str]:
    """Command name -> module, from each command module's ``register``."""
    out = {}
    for info in pkgutil.iter_modules(mlenergy.commands.__path__):
        module = importlib.import_module(f"mlenergy.commands.{info.name}")
        if callable(getattr(module, "register", None)):
            holder = typer.Typer()
            module.register(holder)
            names = [c.name for c in holder.registered_commands]
            names += [g.name for g in holder.registered_groups]
            out.update(dict.fromkeys(names, info.name))
    return out


def test_the_table_lists_every_command_and_its_own_help_line():
    assert {name: module for name, (module, _) in COMMANDS.items()} == _registered()
    for name, (_, line) in COMMANDS.items():
        command = load_command(name)
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert first == line, f"{name}: the table says {line!r}, the command {first!r}"


def test_help_loads_no_command_and_no_data_stack():
    code = (
        "import json, sys\n"
        "from mlenergy.cli import main\n"
        "rc = main(['--help'])\n"
        "mods = [m for m in sys.modules if m.startswith('mlenergy.commands.')\n"
        "        or m.split('.')[0] in ('pandas', 'numpy', 'pydantic', 'torch')]\n"
        "print(json.dumps([rc, sorted(mods)]))\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    rc, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rc == 0 and loaded == []


@pytest.mark.parametrize("argv", [["bench", "--help"], ["estimate", "--help"]])
def test_help_at_80_columns_shows_every_option_name_whole(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= 80
    names = [o for p in load_command(argv[0]).params for o in (*p.opts, *p.secondary_opts)]
    missing = [n for n in names if n not in text.replace(",", " ").split()]
    assert missing == []
