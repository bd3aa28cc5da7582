"""Command-line options built from typed objects: one dataclass per concern, fields documented once.

A command declares a parameter typed with a dataclass (``layout: ParallelLayout``) and
:func:`typed_command` turns the dataclass's fields into options: ``--tensor-parallel`` from the
field ``tensor_parallel``, the field's default as the option's, the docstring written under
the field as the option's help (the layout torchtitan's ``JobConfig`` uses). A field typed with
another dataclass adds that dataclass's options in its place, so a request made of concerns
(a parallel layout, GPU settings) is one flat set of options. The command receives the
dataclass built from the options.

``Given[T]`` instead of ``T`` receives the options as given, not yet built: a field without
default is then an option that may be left out (``None``), and :meth:`Given.build` names the
first one missing as ``--option is required``. A command uses it when some of its modes do not
need the whole object (``mlenergy estimate --batch in.csv`` gives no ``--model``).

A field's ``metadata["cli"]`` may say what its option needs beyond the name and help:
``flags`` (the option's names, e.g. ``("--sm-clock",)``, ``("--model", "-m")`` or
``("--json",)``), ``metavar`` and ``show_default``. A field annotated ``Annotated[T,
typer.Option(...)]`` is that option as written (the shared options of
:mod:`mlenergy.commands.options`). A field whose type has no option form (``GpuSpec``) takes the
first of ``str``, ``int``, ``float``, ``bool`` and ``Path`` in its union.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar

import typer
from typer.models import OptionInfo

from mlenergy.dataclass_fields import flat_fields, is_dataclass_type
from mlenergy.errors import UserError

T = TypeVar("T")
R = TypeVar("R")

CLI_TYPES = (str, int, float, bool, Path)
"""The types an option holds (a field of another type takes the first of these in its union)."""


class Given(Generic[T]):
    """The options of a dataclass as given on the command line, built on demand.

    Args:
        cls: The dataclass.
        values: Every option's value by field name (nested dataclasses' fields flat); a field
            without default that was not given holds ``None``.
        flags: The option name of each field (``--batch-size``), for messages.
    """

    def __init__(self, cls: type[T], values: dict[str, Any], flags: dict[str, str]) -> None:
        self.cls = cls
        self.values = values
        self.flags = flags

    def missing(self, *names: str) -> list[str]:
        """The option names of ``names`` (default: every field without default) not given."""
        wanted = names or tuple(f.name for f in _required(self.cls))
        return [self.flags[n] for n in wanted if self.values.get(n) is None]

    def part(self, cls: type[R]) -> R:
        """The nested dataclass ``cls`` (a field's type) built from its given options."""
        return _assemble(cls, self.values)

    def build(self, fix: str, **values: Any) -> T:
        """The dataclass of the given options, ``values`` replacing or adding fields.

        Args:
            fix: How to fix a missing option (the second half of the error line).
            **values: Field values that replace the given ones (e.g. a swept field).

        Raises:
            UserError: ``--option is required`` for the first field without default that
                has no value.
        """
        merged = {**self.values, **values}
        for f in _required(self.cls):
            if merged.get(f.name) is None:
                raise UserError(f"{self.flags[f.name]} is required", fix)
        return _assemble(self.cls, merged)


def typed_command(fn: Callable[..., R]) -> Callable[..., R]:
    """``fn`` with each dataclass-typed parameter replaced by the options of its fields.

    The result is what typer registers: its signature lists the options (each parameter's
    fields in order, other parameters as they are) and it calls ``fn`` with the built objects.

    Raises:
        TypeError: Two fields (or a field and a parameter) would make the same option.
    """
    hints = typing.get_type_hints(fn, include_extras=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, bool, list[str]]] = {}
    for p in inspect.signature(fn).parameters.values():
        ann = hints.get(p.name, p.annotation)
        cls, lazy = _group_of(ann)
        if cls is None:
            params.append(p.replace(annotation=ann, kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        options = list(_options(cls, lazy))
        groups[p.name] = (cls, lazy, [name for name, _ in options])
        params += [option for _, option in options]
    names = [p.name for p in params]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise TypeError(f"{fn.__name__}: options given twice: {', '.join(clash)}")

    plain = {p.name for p in params} - {n for _, _, fs in groups.values() for n in fs}

    @functools.wraps(fn)
    def command(**kwargs: Any) -> R:
        call = {name: kwargs[name] for name in kwargs if name in plain}
        for name, (cls, lazy, fields) in groups.items():
            values = {f: kwargs[f] for f in fields}
            call[name] = Given(cls, values, flags_of(cls)) if lazy else _assemble(cls, values)
        return fn(**call)

    del command.__wrapped__  # typer reads the signature below, not fn's
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def changed(obj: Any) -> list[str]:
    """The options of dataclass ``obj`` whose value is not their default, by name, in order.

    A switch pair (``--with-x/--without-x``) is named by the side given; a field without
    default counts as changed.
    """
    out: list[str] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        factory = f.default_factory
        if value == (factory() if factory is not dataclasses.MISSING else f.default):
            continue
        flags = f.metadata.get("cli", {}).get("flags", ())
        pair = flags[0].split("/") if flags and "/" in flags[0] else None
        out.append(pair[0 if value else 1] if pair else _long_flag(f))
    return out


def flags_of(cls: type) -> dict[str, str]:
    """The long option name of every field of ``cls`` (nested dataclasses' fields flat)."""
    return {f.name: _long_flag(f) for f, _, _ in flat_fields(cls)}


@functools.cache
def field_docs(cls: type) -> dict[str, str] | None:
    """The docstring written under each field of ``cls``, as one paragraph.

    Returns:
        ``None`` when the source of ``cls`` is not installed (options then have no help).
    """
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return None
    body = ast.parse(inspect.cleandoc(source)).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for node, after in zip(body.body, body.body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def _group_of(ann: Any) -> tuple[type | None, bool]:
    """The dataclass a parameter is typed with, and whether it is ``Given[...]``."""
    if typing.get_origin(ann) is Given:
        (cls,) = typing.get_args(ann)
        return cls, True
    if isinstance(ann, type) and dataclasses.is_dataclass(ann):
        return ann, False
    return None, False


def _options(cls: type, lazy: bool) -> Iterator[tuple[str, inspect.Parameter]]:
    """One (field name, typer parameter) per option of ``cls``, in order."""
    for f, hint, owner in flat_fields(cls):
        yield f.name, _option(f, hint, field_docs(owner), lazy)


def _option(
    f: dataclasses.Field[Any], hint: Any, docs: dict[str, str] | None, lazy: bool
) -> inspect.Parameter:
    """The typer parameter of one field.

    Raises:
        TypeError: The field has neither a docstring nor an option written out.
    """
    default = _default(f)
    if typing.get_origin(hint) is Annotated and any(
        isinstance(m, OptionInfo) for m in typing.get_args(hint)[1:]
    ):
        annotation = hint  # an option written out (a shared one)
    else:
        if docs is not None and f.name not in docs:
            raise TypeError(f"field {f.name} has no docstring: its option would have no help")
        cli = f.metadata.get("cli", {})
        typ = _cli_type(hint)
        if default is inspect.Parameter.empty and lazy:
            typ, default = typ | None, None
        kwargs: dict[str, Any] = {"help": (docs or {}).get(f.name, "")}
        for key in ("metavar", "show_default"):
            if key in cli:
                kwargs[key] = cli[key]
        if default is None:
            kwargs.setdefault("show_default", False)
        annotation = Annotated[typ, typer.Option(*cli.get("flags", ()), **kwargs)]
    return inspect.Parameter(
        f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return None  # a list option left out; the factory fills it in _assemble
    return inspect.Parameter.empty


def _cli_type(hint: Any) -> Any:
    """The option type of a field's type: itself, or its union's CLI type (``| None`` kept)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        optional = type(None) in args
        listed = [a for a in args if typing.get_origin(a) is list]
        plain = [a for a in CLI_TYPES if a in args]
        typ = listed[0] if listed else plain[0]
        return typ | None if optional else typ
    return hint


def _long_flag(f: dataclasses.Field[Any]) -> str:
    flags = [x for x in f.metadata.get("cli", {}).get("flags", ()) if x.startswith("--")]
    return flags[0].split("/")[0] if flags else "--" + f.name.replace("_", "-")


def _required(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of ``cls`` (not of nested dataclasses) that have no default."""
    return [
        f
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


def _assemble(cls: type[T], values: dict[str, Any]) -> T:
    """``cls`` built from flat field values (nested dataclasses from their own fields)."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        hint = hints[f.name]
        if is_dataclass_type(hint):
            kwargs[f.name] = _assemble(hint, values)
        elif f.name in values:
            value = values[f.name]
            if value is None and f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            kwargs[f.name] = value
    return cls(**kwargs)
