"""Import the CSV log of Zeus's ``ZeusMonitor(log_file=...)``.

Zeus writes the header ``start_time,window_name,elapsed_time,gpu{i}_energy,...`` (one column
per monitored GPU index) and one row per ended window: the window's start (Unix seconds), its
name, its duration in seconds and each GPU's energy in joules. The log says nothing of the
model or the workload: they come from options. Rows of one window name are repeats of it and
become one :class:`~mlenergy.records.RunRecord` with per-repeat energies and durations (mean
and 95% confidence interval); a window named ``prefill``, ``decode`` or ``train`` becomes that
phase, any other the whole request (inference) or the training phase (training).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mlenergy.errors import UserError
from mlenergy.importers.common import (
    describe_model,
    fail,
    file_sha256,
    imported_software,
    normalise_dtype,
    normalise_model_id,
    resolve_accelerator,
    stable_id,
    utc_from_unix,
)
from mlenergy.importers.deliver import ImportBatch
from mlenergy.records import (
    Hardware,
    MeasuredScope,
    Phase,
    PhaseResult,
    RepeatStats,
    RunRecord,
    Workload,
)

FORMAT = "zeus-log"
HEADER = ("start_time", "window_name", "elapsed_time")
_GPU_COL = re.compile(r"^gpu(\d+)_energy$")


@dataclass(frozen=True)
class ZeusLogOptions:
    """What the log does not say.

    Attributes:
        model: Model id (required).
        gpu: GPU name (required): the log names none.
        task: Workload label.
        kind: ``inference`` or ``training``.
        dtype: Weight dtype (default: the model config's).
        batch_size: Sequences per window.
        tokens: Tokens processed per window, by window name (energy per token needs them).
        energy_source: Label of the log's figures (default ``measured:zeus-nvml``).
        configs_dir: Folder of model ``config.json`` files.
        torch_version: torch version of the measured program, if known.
        zeus_version: Zeus version that wrote the log, if known.
    """

    model: str
    gpu: str
    task: str | None = None
    kind: str = "inference"
    dtype: str | None = None
    batch_size: int = 1
    tokens: dict[str, int] = field(default_factory=dict)
    energy_source: str = "measured:zeus-nvml"
    configs_dir: Path | None = None
    torch_version: str | None = None
    zeus_version: str | None = None


@dataclass
class _Window:
    starts: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    energies: list[float] = field(default_factory=list)
    by_gpu: dict[int, list[float]] = field(default_factory=dict)


def _float(raw: str, path: Path, where: str, *, positive: bool) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise fail(path, where, f"not a number: {raw!r}") from None
    if not math.isfinite(value) or (positive and value <= 0) or value < 0:
        raise fail(
            path,
            where,
            f"must be a positive number, got {raw!r}",
            "a zero or negative energy or duration is not a measurement (Zeus reads 0 J for "
            "windows shorter than the counter's update period)",
        )
    return value


def read_windows(path: Path) -> tuple[dict[str, _Window], tuple[int, ...]]:
    """Parse the log: windows by name (in order of first appearance) and the GPU indices.

    Raises:
        UserError: Missing file, wrong header, or a bad, zero or negative figure (names the
            row and column).
    """
    if not path.is_file():
        raise UserError(f"{path} does not exist or is not a file", "pass the Zeus log CSV")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path} as text ({type(exc).__name__})") from None
    rows = list(csv.reader(lines))
    header = tuple(c.strip() for c in rows[0]) if rows else ()
    gpus = tuple(int(m.group(1)) for c in header[3:] if (m := _GPU_COL.match(c)))
    if header[:3] != HEADER or not gpus or len(gpus) != len(header) - 3:
        raise fail(
            path,
            "header",
            "expected start_time,window_name,elapsed_time,gpu<i>_energy,..., "
            f"got {','.join(header)!r}",
            "pass the file written by ZeusMonitor(log_file=...) with at least one GPU",
        )
    windows: dict[str, _Window] = {}
    for n, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(header):
            raise fail(path, f"line {n}", f"{len(row)} columns, the header has {len(header)}")
        name = row[1].strip()
        if not name:
            raise fail(path, f"line {n} window_name", "empty")
        win = windows.setdefault(name, _Window())
        win.starts.append(_float(row[0], path, f"line {n} start_time", positive=False))
        win.durations.append(_float(row[2], path, f"line {n} elapsed_time", positive=True))
        energies = [
            _float(row[3 + i], path, f"line {n} {header[3 + i]}", positive=True)
            for i in range(len(gpus))
        ]
        for gpu, value in zip(gpus, energies, strict=True):
            win.by_gpu.setdefault(gpu, []).append(value)
        win.energies.append(sum(energies))
    if not windows:
        raise fail(path, "rows", "the log holds no window", "end at least one window")
    return windows, gpus


def _phase_of(name: str, kind: str) -> Phase:
    if name in ("prefill", "decode", "train"):
        return Phase(name)
    return Phase.TRAIN if kind == "training" else Phase.REQUEST


def _phase(name: str, win: _Window, opts: ZeusLogOptions) -> PhaseResult:
    n = len(win.energies)
    energy = sum(win.energies) / n
    duration = sum(win.durations) / n
    tokens = int(opts.tokens.get(name, 0))
    return PhaseResult.from_totals(
        _phase_of(name, opts.kind),
        duration,
        energy,
        tokens,
        energy_by_device_j={f"gpu:{g}": sum(v) / n for g, v in win.by_gpu.items()},
        energy_j_repeats=RepeatStats.from_values(win.energies, nonnegative=True),
        duration_s_repeats=RepeatStats.from_values(win.durations, nonnegative=True),
    )


def _workload(name: str, win: _Window, opts: ZeusLogOptions, path: Path) -> Workload:
    """The workload of one window: its token count says what it processed.

    A ``prefill`` window's tokens are prompt tokens (it makes the first output token); any
    other inference window's tokens are generated tokens.
    """
    tokens = int(opts.tokens.get(name, 0))
    batch = max(1, opts.batch_size)
    if opts.kind == "inference" and tokens < 1:
        raise fail(
            path,
            "--tokens",
            f"window {name!r} of an inference workload needs its token count",
            f"pass --tokens {name}=N (tokens the window processed, summed over the batch), "
            "or --kind training",
        )
    prefill = name == "prefill"
    # read_log has checked --kind (inference or training)
    kind: Literal["inference", "training"] = "training" if opts.kind == "training" else "inference"
    return Workload(
        kind=kind,
        task=opts.task or name,
        batch_size=batch,
        input_tokens=tokens // batch if prefill else 0,
        output_tokens=(1 if prefill else max(1, tokens // batch))
        if opts.kind == "inference"
        else 0,
        num_requests=batch * len(win.energies),
        prompt_source="unknown (Zeus log)",
        device="cuda",
    )


def _windows_to_import(
    windows: dict[str, _Window], opts: ZeusLogOptions, path: Path, notes: list[str]
) -> dict[str, _Window]:
    """The windows to import: for inference, those given a token count (the others noted).

    An inference log often holds a ``prefill`` and a ``decode`` window; a user who gives only
    ``--tokens decode=N`` asks for the decode figure, so the other windows are left out with a
    note saying how to import them too. With no token count at all the import fails.
    """
    if opts.kind != "inference":
        return windows
    counted = {name: win for name, win in windows.items() if opts.tokens.get(name, 0) >= 1}
    if not counted:
        first = next(iter(windows))
        raise fail(
            path,
            "--tokens",
            f"window {first!r} of an inference workload needs its token count",
            f"pass --tokens {first}=N (tokens the window processed, summed over the batch), "
            "or --kind training",
        )
    for name in windows:
        if name not in counted:
            notes.append(
                f"window {name!r} not imported: it has no token count "
                f"(add --tokens {name}=N to import it too)"
            )
    return counted


def read_log(path: Path, opts: ZeusLogOptions) -> ImportBatch:
    """Read a Zeus log into one run record per window name.

    Raises:
        UserError: A bad log (see :func:`read_windows`), an unknown GPU, an unknown model, or an
            inference workload with no token count.
    """
    if opts.kind not in ("inference", "training"):
        raise fail(path, "--kind", f"{opts.kind!r} is neither inference nor training")
    unknown = sorted(set(opts.tokens))
    windows, gpus = read_windows(path)
    unknown = [w for w in unknown if w not in windows]
    if unknown:
        raise fail(path, "--tokens", f"no window named {unknown[0]!r} in the log")
    gpu = resolve_accelerator(opts.gpu, path, "--gpu")
    model_id = normalise_model_id(opts.model)
    notes: list[str] = []
    model, _ = describe_model(
        model_id,
        normalise_dtype(opts.dtype),
        configs_dir=opts.configs_dir,
        path=path,
        key="--model",
        notes=notes,
        why_no_dtype="no --dtype given",
    )
    digest = file_sha256(path)
    records = []
    for name, win in _windows_to_import(windows, opts, path, notes).items():
        records.append(
            RunRecord(
                run_id=stable_id("zeus", digest, name, model_id, gpu.name),
                created_at=utc_from_unix(max(win.starts)),
                started_at=utc_from_unix(min(win.starts)),
                model=model,
                workload=_workload(name, win, opts, path),
                hardware=Hardware(
                    accelerator_model=gpu.name,
                    accelerator_count=len(gpus),
                    accelerator_memory_gb=gpu.memory_gb,
                    accelerator_tdp_w=gpu.tdp_w,
                ),
                software=imported_software(torch=opts.torch_version, zeus=opts.zeus_version),
                energy_source=opts.energy_source,
                scope=MeasuredScope(
                    gpu_indices=gpus,
                    description=f"GPU energy of ZeusMonitor window {name!r} (log {path.name})",
                ),
                repeats=len(win.energies),
                phases=(_phase(name, win, opts),),
                tags={
                    "origin": "zeus ZeusMonitor log",
                    "imported_from": FORMAT,
                    "window_name": name,
                    "source_file": path.name,
                    "source_sha256": digest,
                    **({} if name == "prefill" else {"input_tokens": "unknown"}),
                },
            )
        )
    return ImportBatch(FORMAT, path, tuple(records), tuple(dict.fromkeys(notes)))
