"""Pipeline stage profiles: the time and energy of one microbatch per stage, instruction and clock.

The profile CSV has exactly the columns ``stage,instruction,frequency_mhz,time_s,energy_j``: one
row per pipeline stage x instruction (``forward`` | ``backward``) x SM clock, giving the time (s)
and energy (J) of one microbatch on one GPU of that stage. Stages are numbered ``0..S-1``.
The Perseus artifact's names for the last three (``frequency,time,energy``, same units) are read
too, so its profiles load as published.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from mlenergy.errors import UserError

PROFILE_COLUMNS = ("stage", "instruction", "frequency_mhz", "time_s", "energy_j")
PERSEUS_COLUMNS = {"frequency": "frequency_mhz", "time": "time_s", "energy": "energy_j"}
"""The Perseus artifact's column names and the profile columns they mean (same units)."""
INSTRUCTIONS = ("forward", "backward")


@dataclass(frozen=True)
class ClockOption:
    """One measured (or estimated) point of an instruction.

    Attributes:
        frequency_mhz: Locked SM clock (MHz).
        time_s: Time of one microbatch on one GPU (s).
        energy_j: Energy of one microbatch on one GPU (J).
    """

    frequency_mhz: int
    time_s: float
    energy_j: float


@dataclass(frozen=True)
class PipelineProfile:
    """Per-stage, per-instruction clock options of one pipeline.

    Attributes:
        options: ``options[(stage, instruction)]`` lists the clock options, fastest clock first.
        energy_source: Where the figures came from (``measured:...``, ``estimated:...``,
            ``profile:<file>``).
    """

    options: dict[tuple[int, str], list[ClockOption]]
    energy_source: str = "profile"
    stages: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        stages = tuple(sorted({s for s, _ in self.options}))
        object.__setattr__(self, "stages", stages)
        check_complete(self.options, "profile")

    @property
    def num_stages(self) -> int:
        """Number of pipeline stages."""
        return len(self.stages)

    def max_clock(self, stage: int, instruction: str) -> ClockOption:
        """The option at the highest SM clock of ``(stage, instruction)``."""
        return max(self.options[(stage, instruction)], key=lambda o: o.frequency_mhz)

    def rows(self) -> list[dict[str, float | int | str]]:
        """The profile as CSV rows (stage, instruction, clock descending)."""
        out: list[dict[str, float | int | str]] = []
        for (stage, inst), opts in sorted(self.options.items()):
            for o in sorted(opts, key=lambda o: -o.frequency_mhz):
                out.append(
                    {
                        "stage": stage,
                        "instruction": inst,
                        "frequency_mhz": o.frequency_mhz,
                        "time_s": o.time_s,
                        "energy_j": o.energy_j,
                    }
                )
        return out


def check_complete(options: dict[tuple[int, str], list[ClockOption]], where: str) -> None:
    """Every stage ``0..S-1`` has both instructions with at least one option.

    Raises:
        UserError: A stage or (stage, instruction) pair is missing.
    """
    if not options:
        raise UserError(f"{where}: no rows", "Give one row per stage x instruction x clock")
    stages = sorted({s for s, _ in options})
    if stages != list(range(len(stages))):
        raise UserError(
            f"{where}: stages are {stages}; they must be numbered 0..{len(stages) - 1}",
            "Number the pipeline stages from 0 without gaps",
        )
    for stage in stages:
        for inst in INSTRUCTIONS:
            if not options.get((stage, inst)):
                raise UserError(
                    f"{where}: missing (stage {stage}, instruction {inst})",
                    "Every stage needs forward and backward rows",
                )


def _number(text: str, column: str, line: int, path: str, integer: bool = False) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UserError(
            f"{path} row {line}: {column} {text!r} is not a number", "Fix that cell"
        ) from None
    if not math.isfinite(value):
        raise UserError(f"{path} row {line}: {column} {text!r} is not finite", "Fix that cell")
    if integer and value != int(value):
        raise UserError(f"{path} row {line}: {column} {text!r} is not an integer", "Fix that cell")
    return value


def _parse_row(row: dict[str, str], line: int, path: str) -> tuple[int, str, ClockOption]:
    stage = _number(row["stage"], "stage", line, path, integer=True)
    if stage < 0:
        raise UserError(f"{path} row {line}: stage {row['stage']!r} is negative", "Fix that cell")
    inst = (row["instruction"] or "").strip().lower()
    if inst not in INSTRUCTIONS:
        raise UserError(
            f"{path} row {line}: instruction {row['instruction']!r} is not forward or backward",
            "Use forward or backward",
        )
    freq = _number(row["frequency_mhz"], "frequency_mhz", line, path, integer=True)
    time_s = _number(row["time_s"], "time_s", line, path)
    energy_j = _number(row["energy_j"], "energy_j", line, path)
    for name, value in (("frequency_mhz", freq), ("time_s", time_s), ("energy_j", energy_j)):
        if value <= 0:
            raise UserError(
                f"{path} row {line}: {name} is {value:g}; it must be positive", "Fix that cell"
            )
    return int(stage), inst, ClockOption(int(freq), time_s, energy_j)


def read_profile_csv(path: str | Path) -> PipelineProfile:
    """Read and validate a profile CSV.

    Args:
        path: CSV with exactly the columns of :data:`PROFILE_COLUMNS`.

    Raises:
        UserError: Unreadable file, unknown or missing columns, a non-numeric, negative or
            zero value, a duplicate (stage, instruction, frequency_mhz) row, or a missing
            (stage, instruction) pair; the message names the row or column.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read profile {p}: {exc.strerror}", "Check the path") from None
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in (reader.fieldnames or [])]
    header = [PERSEUS_COLUMNS.get(h, h) for h in header]
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise UserError(
            f"{p}: column(s) {', '.join(repeated)} given twice (under either name)",
            f"The profile columns are {','.join(PROFILE_COLUMNS)}",
        )
    unknown = [h for h in header if h not in PROFILE_COLUMNS]
    if unknown:
        raise UserError(
            f"{p}: unknown column(s) {', '.join(unknown)}",
            f"The profile columns are {','.join(PROFILE_COLUMNS)}",
        )
    missing = [c for c in PROFILE_COLUMNS if c not in header]
    if missing:
        raise UserError(
            f"{p}: missing column(s) {', '.join(missing)}",
            f"The profile columns are {','.join(PROFILE_COLUMNS)}",
        )
    reader.fieldnames = header
    options: dict[tuple[int, str], list[ClockOption]] = {}
    seen: dict[tuple[int, str, int], int] = {}
    for line, row in enumerate(reader, start=2):
        if None in row or any(row.get(c) is None for c in PROFILE_COLUMNS):
            raise UserError(f"{p} row {line}: wrong number of cells", "Fix that row")
        stage, inst, opt = _parse_row(row, line, str(p))
        key = (stage, inst, opt.frequency_mhz)
        if key in seen:
            raise UserError(
                f"{p} row {line}: duplicate of row {seen[key]} (stage {stage}, {inst}, "
                f"{opt.frequency_mhz} MHz)",
                "Keep one row per stage x instruction x clock",
            )
        seen[key] = line
        options.setdefault((stage, inst), []).append(opt)
    check_complete(options, str(p))
    return PipelineProfile(options, energy_source=f"profile:{p.name}")


def write_profile_csv(profile: PipelineProfile, path: str | Path) -> Path:
    """Write ``profile`` as a profile CSV (temp file, then rename: never half-written).

    Returns:
        The path written.
    """
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(PROFILE_COLUMNS), lineterminator="\n")
        writer.writeheader()
        for row in profile.rows():
            writer.writerow(
                {k: repr(float(v)) if isinstance(v, float) else v for k, v in row.items()}
            )
    tmp.replace(p)
    return p


def profile_from_table(
    rows: list[dict[str, float | int | str]], energy_source: str
) -> PipelineProfile:
    """Build a profile from rows with the profile columns (e.g. a renamed reference table).

    Raises:
        UserError: As :func:`read_profile_csv` for bad values.
    """
    options: dict[tuple[int, str], list[ClockOption]] = {}
    for line, row in enumerate(rows, start=1):
        stage, inst, opt = _parse_row({k: str(v) for k, v in row.items()}, line, "rows")
        options.setdefault((stage, inst), []).append(opt)
    return PipelineProfile(options, energy_source=energy_source)
