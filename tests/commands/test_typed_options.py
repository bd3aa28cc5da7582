"""Options built from typed objects: names, defaults and help come from the dataclass fields."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import pytest
import typer
from typer.testing import CliRunner

from mlenergy.commands.typed import Given, changed, field_docs, flags_of, typed_command
from mlenergy.errors import UserError


@dataclass(frozen=True)
class Inner:
    """A nested concern."""

    depth: int = 1
    """How deep (levels)."""
    clock_mhz: float | None = field(default=None, metadata={"cli": {"flags": ("--clock",)}})
    """A clock in MHz."""


@dataclass(frozen=True)
class Outer:
    """A request with a required field and a nested one."""

    name: str
    """What to run."""
    inner: Inner = field(default_factory=Inner)
    """The nested concern."""
    loud: bool = field(default=False, metadata={"cli": {"flags": ("--loud",)}})
    """Say more."""
    tags: list[str] = field(default_factory=list)
    """Labels (repeatable)."""


@dataclass(frozen=True)
class Mode:
    """A switch pair."""

    with_x: bool = field(default=True, metadata={"cli": {"flags": ("--with-x/--without-x",)}})
    """Use x."""
    level: str = "low"
    """A level."""


def _run(fn, args):
    app = typer.Typer(add_completion=False, rich_markup_mode=None)
    app.command()(fn)
    app.command("other")(lambda: None)  # two commands: the first is named on the line
    return CliRunner().invoke(app, [fn.__name__.replace("_", "-"), *args])


def test_fields_become_options_with_their_docstrings_as_help():
    seen = {}

    @typed_command
    def go(req: Outer, count: int = 2) -> None:
        seen["req"], seen["count"] = req, count

    params = inspect.signature(go).parameters
    assert list(params) == ["name", "depth", "clock_mhz", "loud", "tags", "count"]
    result = _run(go, ["--name", "a", "--depth", "3", "--clock", "1500", "--loud", "--tags", "t"])
    assert result.exit_code == 0, result.output
    assert seen == {"req": Outer("a", Inner(3, 1500.0), True, ["t"]), "count": 2}
    help_text = _run(go, ["--help"]).output
    for words in ("How deep (levels).", "--clock", "A clock in MHz.", "[required]"):
        assert words in help_text
    assert _run(go, []).exit_code == 2  # --name is required
    assert _run(go, ["--name", "b"]).exit_code == 0 and seen["req"].tags == []


def test_given_leaves_required_fields_to_the_command():
    @typed_command
    def lazy(req: Given[Outer]) -> None:
        assert req.missing() == ["--name"]
        assert req.part(Inner) == Inner(depth=5)
        with pytest.raises(UserError, match=r"--name is required\. Pass a name"):
            req.build("Pass a name")
        assert req.build("unused", name="x").name == "x"

    result = _run(lazy, ["--depth", "5"])
    assert result.exit_code == 0, result.output


def test_changed_names_the_options_given_another_value():
    assert changed(Mode()) == []
    assert changed(Mode(with_x=False, level="high")) == ["--without-x", "--level"]
    assert flags_of(Outer)["clock_mhz"] == "--clock"


def test_a_field_without_docstring_or_a_clash_is_refused():
    @dataclass
    class Bare:
        """No field docs."""

        x: int = 0

    with pytest.raises(TypeError, match="field x has no docstring"):
        typed_command(_takes(Bare))
    with pytest.raises(TypeError, match="given twice: clock_mhz, depth"):
        typed_command(_takes(Outer, Inner))
    assert field_docs(Mode) == {"with_x": "Use x.", "level": "A level."}


def _takes(*types: type):
    """A function whose parameters are typed with ``types``."""
    params = [
        inspect.Parameter(f"p{i}", inspect.Parameter.KEYWORD_ONLY, annotation=t)
        for i, t in enumerate(types)
    ]

    def fn(**kwargs: object) -> None:
        return None

    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in params}
    return fn
