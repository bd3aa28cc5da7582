"""The ``mlenergy`` command: assembles the sub-commands of :mod:`mlenergy.commands`.

Each command is a few lines calling the library. Bad input raises
:class:`mlenergy.errors.UserError`, shown here as a one-line ``error:`` message with exit code 2.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

import mlenergy.commands
from mlenergy.errors import Interrupted, UserError, ValidationFailed

app = typer.Typer(
    name="mlenergy",
    help="Measure, estimate, reduce and publish the energy of AI models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


_CTRL_C_EXIT = 130
_INTERRUPTED = "interrupted: work already stored is kept"


def _version_callback(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"mlenergy {version('mlenergy-lab')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """Measure, estimate, reduce and publish the energy of AI models."""


def _register_commands() -> None:
    """Import every module of :mod:`mlenergy.commands` that defines ``register`` and call it."""
    for info in sorted(pkgutil.iter_modules(mlenergy.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"mlenergy.commands.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(app)


_register_commands()


def _click_error_classes() -> dict[str, tuple[type[BaseException], ...]]:
    """The click exception classes, from typer's vendored click and from click if installed."""
    modules = []
    try:
        from typer._click import exceptions as vendored

        modules.append(vendored)
    except ImportError:  # older typer uses click directly
        pass
    try:
        import click.exceptions as plain

        modules.append(plain)
    except ImportError:
        pass
    names = ("NoArgsIsHelpError", "ClickException", "Abort")
    return {n: tuple(getattr(m, n) for m in modules if hasattr(m, n)) for n in names}


def _usage_message(exc: BaseException) -> str:
    """One line for a command-line usage error: what was wrong and where to read the usage."""
    message = " ".join(str(exc.format_message()).split()).rstrip(".")  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "mlenergy"
    return f"{message}. Run '{command} --help' for the usage"


def _print_problems(exc: ValidationFailed) -> None:
    """A validation failure: its headline once, then each problem on its own line."""
    from mlenergy.store.validation import terminal_text

    typer.echo(f"error: {exc.summary}", err=True)
    for problem in exc.problems:  # submitted text: control characters made visible
        typer.echo(f"  - {terminal_text(problem, 500)}", err=True)


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
        click_error = _click_error_classes()
        if isinstance(exc, click_error["NoArgsIsHelpError"]):
            typer.echo(exc.ctx.get_help() if exc.ctx else str(exc))
            return 0
        if isinstance(exc, click_error["ClickException"]):
            typer.echo(f"error: {_usage_message(exc)}", err=True)
            return 2
        if isinstance(exc, click_error["Abort"]):
            typer.echo("aborted", err=True)
            return 130
        raise
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
