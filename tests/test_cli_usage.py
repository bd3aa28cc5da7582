"""Command-line usage errors are one-line `error:` messages with exit code 2."""

import pytest

from mlenergy.cli import main


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--bogus"],
        ["bench", "--model", "preset:tiny-dense", "--repeats", "abc"],
        ["runs", "list", "extra"],
        ["nosuchcmd"],
        ["schema", "export", "/tmp/somewhere"],
    ],
    ids=["unknown option", "bad type", "extra argument", "unknown command", "positional"],
)
def test_usage_errors_exit_2_with_one_line(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ")
    assert "--help" in err[0]


def test_no_arguments_prints_help_and_exits_0(capsys):
    assert main([]) == 0
    assert "Usage" in capsys.readouterr().out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("mlenergy ")


def test_ctrl_c_in_any_command_is_said(monkeypatch, capsys):
    """Typer turns a Ctrl-C inside a command into a silent exit 130: the CLI says it."""
    import mlenergy.quality.evaluate as evaluate

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluate, "model_perplexity", interrupted)
    assert main(["quality", "--model", "preset:tiny-dense", "--no-store"]) == 130
    assert capsys.readouterr().err.strip().startswith("interrupted:")
