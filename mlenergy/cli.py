"""The ``mlenergy`` command: the sub-commands of :mod:`mlenergy.commands`, loaded when used.

:data:`COMMANDS` names each command, the module that defines it and the line ``mlenergy
--help`` shows for it. A command's module (and the library it calls) is imported only when that
command runs or shows its own help, so ``mlenergy --help`` and a light command never pay for
the others' imports.

Bad input raises :class:`mlenergy.errors.UserError`, shown here as a one-line ``error:``
message with exit code 2.
"""

from __future__ import annotations

import functools
import importlib
import sys
from importlib.metadata import version as package_version
from types import ModuleType
from typing import Any

import typer
from typer.core import TyperGroup

from mlenergy.commands import APP_SETTINGS
from mlenergy.errors import Interrupted, UserError, ValidationFailed, terminal_text

_CLICK: list[ModuleType] = []
"""The exception modules of typer's vendored click and of click itself, where installed."""
try:
    from typer._click import exceptions as _vendored_click

    _CLICK.append(_vendored_click)
except ImportError:  # older typer uses click directly
    pass
try:
    import click.exceptions as _plain_click

    _CLICK.append(_plain_click)
except ImportError:
    pass

COMMANDS: dict[str, tuple[str, str]] = {
    "bench": (
        "bench",
        "Measure prefill, decode and whole-request energy of models over batch sizes.",
    ),
    "demo": (
        "demo",
        "Run the default dense-vs-MoE study end to end (5 minutes on 2 quiet cores, 17 busy).",
    ),
    "quality": ("quality", "Measure the quality of a model and store it as a quality record."),
    "reference": (
        "reference",
        "List the shipped reference data: each file, its source, licence and date.",
    ),
    "submit": (
        "submit",
        "Validate a result bundle and queue it for approval (every problem is listed).",
    ),
    "sweep": (
        "sweep",
        "Run the grid of a sweep plan, in-process or on Ray, skipping runs already stored.",
    ),
    "estimate": (
        "estimate",
        "Predict energy per token, throughput and power of LLM serving on any GPU.",
    ),
    "import": (
        "import_results",
        "Import results of other tools (ML.ENERGY benchmark, lm-eval, optimum-benchmark, Zeus).",
    ),
    "leaderboard": (
        "leaderboard",
        "Serve the leaderboard app: the shipped ML.ENERGY reference beside your store.",
    ),
    "optimize": (
        "optimize",
        "Plan lower-energy runs: pipeline frequency plans, power limits, site power caps.",
    ),
    "models": ("models", "Models to try the tools on."),
    "runs": ("runs", "List, show and export the runs in the store."),
    "schema": ("schema", "The records' JSON Schemas."),
    "study": (
        "study",
        "Run studies that answer a question end to end (records, report, figures).",
    ),
    "submissions": ("submit", "Review queued result bundles."),
}
"""Command name -> (its module in :mod:`mlenergy.commands`, the line ``--help`` lists)."""

_CTRL_C_EXIT = 130
_INTERRUPTED = "interrupted: work already stored is kept"


@functools.cache
def load_command(name: str) -> Any:
    """The click command (or group) ``name``, its module imported and registered now."""
    module = importlib.import_module(f"mlenergy.commands.{COMMANDS[name][0]}")
    holder = typer.Typer(**APP_SETTINGS)
    module.register(holder)
    return typer.main.get_group(holder).commands[name]


class _LazyCommands(TyperGroup):
    """The root group: lists :data:`COMMANDS` and loads one when it is called."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, line) for name, (_, line) in COMMANDS.items()])


app = typer.Typer(
    name="mlenergy",
    cls=_LazyCommands,
    help="Measure, estimate, reduce and publish the energy of AI models.",
    no_args_is_help=True,
    **APP_SETTINGS,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"mlenergy {package_version('mlenergy-lab')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """Measure, estimate, reduce and publish the energy of AI models."""


def _click_errors(name: str) -> tuple[type[BaseException], ...]:
    """The click exception class ``name`` from typer's vendored click and from click."""
    return tuple(getattr(m, name) for m in _CLICK if hasattr(m, name))


def _usage_message(exc: BaseException) -> str:
    """One line for a command-line usage error: what was wrong and where to read the usage."""
    text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    message = " ".join(str(text).split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "mlenergy"
    return f"{message}. Run '{command} --help' for the usage"


def _print_problems(exc: ValidationFailed) -> None:
    """A validation failure: its headline once, then each problem on its own line."""
    typer.echo(f"error: {exc.summary}", err=True)
    for problem in exc.problems:  # submitted text: control characters made visible
        typer.echo(f"  - {terminal_text(problem, 500)}", err=True)


def _click_exit(exc: Exception) -> int | None:
    """Print a click exception (help asked by no arguments, usage error, abort); its exit code.

    Returns:
        ``None`` when ``exc`` is none of these.
    """
    if isinstance(exc, _click_errors("NoArgsIsHelpError")):
        ctx = getattr(exc, "ctx", None)
        typer.echo(ctx.get_help() if ctx else str(exc))
        return 0
    if isinstance(exc, _click_errors("ClickException")):
        typer.echo(f"error: {_usage_message(exc)}", err=True)
        return 2
    if isinstance(exc, _click_errors("Abort")):
        typer.echo("aborted", err=True)
        return 130
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the process exit code (2 for bad input).

    Args:
        argv: Arguments without the program name (default: ``sys.argv[1:]``).
    """
    try:
        result = app(args=argv, standalone_mode=False)
    except ValidationFailed as exc:
        _print_problems(exc)
        return exc.exit_code
    except UserError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        return exc.exit_code
    except Interrupted as exc:
        typer.echo(f"interrupted: {exc.summary}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        typer.echo(_INTERRUPTED, err=True)
        return _CTRL_C_EXIT
    except SystemExit as exc:  # typer/click exits (e.g. --help)
        return int(exc.code or 0)
    except Exception as exc:
        code = _click_exit(exc)
        if code is None:
            raise
        return code
    # In non-standalone mode click returns the exit code of ``typer.Exit`` / ``ctx.exit``;
    # typer turns a Ctrl-C inside a command into exit code 130 without a word.
    code = result if isinstance(result, int) else 0
    if code == _CTRL_C_EXIT:
        typer.echo(_INTERRUPTED, err=True)
    return code


def run() -> None:
    """Console-script entry point: run :func:`main` and exit with its status."""
    sys.exit(main())


if __name__ == "__main__":
    run()
