"""Measure a pipeline stage's profile on a real GPU with Zeus (locked SM clocks).

For each SM clock, lock the GPU's clock through Zeus's device API
(``zeus.device.get_gpus().set_gpu_locked_clocks``), run the stage's forward and backward a few
times to warm up, then measure ``repeats`` calls of each in a :class:`zeus.monitor.ZeusMonitor`
window; time and energy of one microbatch are the window's over ``repeats``. The clock is
unlocked afterwards, also on error. A window that reads no energy is an error (never a silent
zero): raise ``repeats`` until the window is longer than the counter's update period.

Example (one stage of a real job, on GPU 0; write one CSV per stage and concatenate)::

    rows = measure_stage_profile(stage=3, forward=lambda: run_fwd(mb),
                                 backward=lambda: run_bwd(mb), gpu_index=0)
    write_profile_csv(PipelineProfile(rows, "measured:zeus-nvml"), "stage3.csv")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlenergy.errors import UserError
from mlenergy.measure.zeus_import import zeus_monitor
from mlenergy.optimize.profile import ClockOption, PipelineProfile


def measure_stage_profile(
    stage: int,
    forward: Callable[[], object],
    backward: Callable[[], object],
    gpu_index: int = 0,
    clocks_mhz: Sequence[int] | None = None,
    warmup: int = 2,
    repeats: int = 5,
    sync_execution: bool = True,
) -> dict[tuple[int, str], list[ClockOption]]:
    """Time and energy of one forward and one backward of ``stage`` at every SM clock.

    Args:
        stage: The stage's index in the pipeline.
        forward: Runs one microbatch's forward of the stage.
        backward: Runs one microbatch's backward of the stage.
        gpu_index: The GPU the stage runs on (Zeus index).
        clocks_mhz: SM clocks to measure (default: every clock the GPU supports).
        warmup: Unmeasured calls of each instruction after each clock change.
        repeats: Measured calls of each instruction per clock.
        sync_execution: Let Zeus synchronise CUDA around windows (off for CPU-only torch).

    Returns:
        ``{(stage, "forward"): [...], (stage, "backward"): [...]}``, highest clock first.

    Raises:
        UserError: No such GPU, an unsupported clock, non-positive ``repeats``, or a window
            that read no energy.
    """
    from zeus.device import get_gpus

    if repeats < 1 or warmup < 0:
        raise UserError(f"repeats {repeats} / warmup {warmup} out of range", "Use repeats >= 1")
    gpus = get_gpus()
    if gpu_index >= len(gpus):
        raise UserError(f"GPU {gpu_index} is not present ({len(gpus)} GPU(s))", "Pick a GPU")
    supported = sorted(gpus.get_supported_graphics_clocks(gpu_index), reverse=True)
    clocks = sorted(clocks_mhz or supported, reverse=True)
    bad = [c for c in clocks if c not in supported]
    if bad:
        raise UserError(f"clock(s) {bad} MHz not supported by GPU {gpu_index}", "Use its clocks")
    monitor = zeus_monitor().ZeusMonitor(gpu_indices=[gpu_index], cpu_indices=[])
    out: dict[tuple[int, str], list[ClockOption]] = {
        (stage, "forward"): [],
        (stage, "backward"): [],
    }
    try:
        for clock in clocks:
            gpus.set_gpu_locked_clocks(gpu_index, clock, clock)
            for _ in range(warmup):
                forward()
                backward()
            for name, fn in (("forward", forward), ("backward", backward)):
                key = f"mlenergy-profile-{stage}-{name}-{clock}"
                monitor.begin_window(key, sync_execution=sync_execution)
                for _ in range(repeats):
                    fn()
                m = monitor.end_window(key, sync_execution=sync_execution)
                energy = m.gpu_energy.get(gpu_index)
                if not energy:
                    raise UserError(
                        f"stage {stage} {name} at {clock} MHz read no GPU energy over "
                        f"{m.time:.3f} s",
                        "Raise repeats so each window outlasts the energy counter's update",
                    )
                out[(stage, name)].append(
                    ClockOption(int(clock), m.time / repeats, energy / repeats)
                )
    finally:
        gpus.reset_gpu_locked_clocks(gpu_index)
    return out


def merge_stage_profiles(
    parts: Sequence[dict[tuple[int, str], list[ClockOption]]], energy_source: str
) -> PipelineProfile:
    """One pipeline profile from per-stage measurements (stages 0..S-1, each once)."""
    options: dict[tuple[int, str], list[ClockOption]] = {}
    for part in parts:
        for key, opts in part.items():
            if key in options:
                raise UserError(f"stage {key[0]} {key[1]} measured twice", "Merge each stage once")
            options[key] = list(opts)
    return PipelineProfile(options, energy_source=energy_source)
