"""Every command the README's tour names runs as written and exits 0.

The tour is read from the README itself: a command added there must be listed below as run in
full or as ``--help`` (where it would take long or start a server), and the ``--help`` ones have
every option the tour gives them checked against the command's own options. Each runs as a
newcomer would run it: a fresh ``mlenergy`` process in an empty folder (``examples/`` beside
it), with its own store. What the newcomer tripped on is checked on the way: the tour's
``optimize power-cap`` needs no deadline, ``estimate`` prints its two breakdowns apart, and
``demo --help`` states the time it was measured to take.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

RUN = (
    "mlenergy estimate",
    "mlenergy optimize power-cap",
    "mlenergy reference",
)
"""Tour commands run in full (seconds each)."""
HELP = (
    "mlenergy bench --model preset:tiny-moe",  # 10-30 s of generation on a CPU
    "mlenergy bench --endpoint",  # needs a running server
    "mlenergy optimize pipeline",  # first run compiles the planner's kernels (tens of seconds)
    "mlenergy study dense-vs-moe --measured",  # about a minute
    "mlenergy leaderboard",  # starts a web server
    "mlenergy sweep",  # trains nothing, but runs four benches
    "mlenergy models save-tiny",  # run in full by tests/workloads/serving/test_serving_tiny_model
)
"""Tour commands run as ``--help``, their options checked against the command."""
SLOW = (
    "mlenergy bench --model preset:tiny-moe",
    "mlenergy optimize pipeline",
    "mlenergy study dense-vs-moe --measured",
    "mlenergy sweep",
)
"""Of the ``--help`` ones, those also run in full in the slow tests."""


def tour_commands() -> list[str]:
    """The commands of the README's tour, one per entry, continuation lines joined.

    Comments are dropped and an optional ``[--flag]`` is left out.
    """
    text = README.read_text(encoding="utf-8")
    tour = text[text.index("## A tour") :]
    block = re.search(r"```bash\n(.*?)```", tour, re.S)
    assert block, "the README's tour has no bash block"
    joined = block.group(1).replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        command = re.sub(r"\s+#.*$", "", line).strip()
        command = re.sub(r"\s*\[[^\]]*\]", "", command)
        if command.startswith("mlenergy "):
            out.append(" ".join(command.split()))
    return out


def _kind(command: str) -> str:
    for prefix in RUN:
        if command.startswith(prefix):
            return "run"
    for prefix in HELP:
        if command.startswith(prefix):
            return "help"
    raise AssertionError(f"tour command {command!r} is in neither RUN nor HELP")


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        MLENERGY_DATA_DIR=str(tmp / "data"),
        OMP_NUM_THREADS="1",
        COLUMNS="200",
    )
    return env


def _mlenergy(args: list[str], tmp: Path, timeout: float = 300.0) -> subprocess.CompletedProcess:
    """``mlenergy ARGS`` in a fresh process, in ``tmp`` (with ``examples/`` beside it)."""
    if not (tmp / "examples").exists():
        (tmp / "examples").symlink_to(ROOT / "examples")
    return subprocess.run(
        [sys.executable, "-m", "mlenergy.cli", *args],
        cwd=tmp,
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _command_path(words: list[str]) -> tuple[list[str], object]:
    """The sub-command words of ``mlenergy ...`` and its click command."""
    from mlenergy.cli import app

    command = typer.main.get_command(app)
    path = []
    for word in words:
        # the root loads its sub-commands when asked for one (mlenergy.cli._LazyCommands)
        get = getattr(command, "get_command", None)
        sub = get(click.Context(command), word) if get is not None else None
        if sub is None:
            break
        path.append(word)
        command = sub
    return path, command


def _options(command: object) -> set[str]:
    names: set[str] = set()
    for param in getattr(command, "params", []):
        names.update(getattr(param, "opts", []))
        names.update(getattr(param, "secondary_opts", []))
    return names


TOUR = tour_commands()


def test_the_tour_is_read_and_every_command_is_listed():
    assert len(TOUR) >= 8, TOUR
    for command in TOUR:
        _kind(command)


@pytest.fixture(scope="module")
def tour_run(tmp_path_factory):
    """Run a tour command once per module (several checks read its output)."""
    done: dict[str, subprocess.CompletedProcess] = {}

    def run(command: str) -> subprocess.CompletedProcess:
        if command not in done:
            tmp = tmp_path_factory.mktemp("tour")
            done[command] = _mlenergy(shlex.split(command)[1:], tmp)
        return done[command]

    return run


def _tour(prefix: str) -> str:
    (command,) = [c for c in TOUR if c.startswith(prefix)]
    return command


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c in TOUR if _kind(c) == "run"])
def test_tour_command_runs_as_written(command, tour_run):
    done = tour_run(command)
    assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
    assert done.stdout.strip()


@pytest.mark.parametrize("command", [c for c in TOUR if _kind(c) == "help"])
def test_long_tour_command_has_every_option_it_is_given(command, capsys):
    from mlenergy.cli import main

    words = shlex.split(command)[1:]
    path, click_command = _command_path(words)
    given = {w.split("=")[0] for w in words if w.startswith("--")}
    missing = given - _options(click_command)
    assert not missing, f"{command}: no such option(s) {sorted(missing)}"
    assert main([*path, "--help"]) == 0
    assert "Usage:" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c in TOUR if c.startswith(SLOW)])
def test_long_tour_command_runs_as_written(command, tmp_path):
    done = _mlenergy(shlex.split(command)[1:], tmp_path, timeout=900.0)
    assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
    assert done.stdout.strip()


def test_power_cap_of_the_tour_needs_no_deadline_and_says_the_default(tour_run):
    command = _tour("mlenergy optimize power-cap")
    assert "--itl-limit-ms" not in command
    done = tour_run(command)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "median ITL <= 50 ms" in done.stdout


def _mj(text: str) -> float:
    value, unit = text.split()
    return float(value) * {"J": 1.0, "mJ": 1e-3, "uJ": 1e-6}[unit]


def test_estimate_prints_each_breakdown_on_its_own_line_adding_up_to_the_total(tour_run):
    done = tour_run(_tour("mlenergy estimate"))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    headline = next(x for x in lines if "energy per output token" in x)
    total = _mj(headline.split(":")[1].split("(")[0])
    splits = [x for x in lines if x.strip().startswith("per token by")]
    assert [x.split(":")[0].split()[-1] for x in splits] == ["phase", "cause"]
    for line in splits:
        parts = [p.strip().split(" ", 1)[1] for p in line.split(":", 1)[1].split(" + ")]
        assert sum(_mj(p) for p in parts) == pytest.approx(total, rel=2e-3), line


def test_demo_help_states_the_measured_time(capsys):
    from mlenergy.cli import main

    assert main(["demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "2-5 minutes" not in text
    assert re.search(r"\d+ minutes on 2 quiet cores, \d+ busy", text)
