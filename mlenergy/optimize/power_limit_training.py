"""Run Zeus's power-limit optimizer during training, on the project's meter.

Zeus's :class:`~zeus.optimizer.power_limit.GlobalPowerLimitOptimizer` profiles each GPU power
limit for a few steps during training, then keeps the one its selector picks. Here it runs on
the :class:`~mlenergy.measure.EnergyMeter`'s own Zeus monitor (same GPUs, same energy counters,
the meter's choice of CUDA synchronisation), and the outcome is recorded in the run record's
tags.

Plain training loop::

    meter = EnergyMeter(gpu_indices=[0])
    plo = power_limit_optimizer(meter, objective="zeus-cost", eta=0.5)
    with meter.window("train") as w:
        for step in range(steps):
            plo.on_step_begin()
            train_step()
            plo.on_step_end()
    outcome = power_limit_outcome(plo, meter.energy_source)  # chosen limit, measured saving
    record = with_power_limit_tags(record, outcome)  # into the RunRecord

Hugging Face ``Trainer`` (``Trainer`` needs ``accelerate``)::

    callback = hf_power_limit_callback(meter, objective="energy")
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[callback])
    with meter.window("train") as w:
        trainer.train()
    outcome = power_limit_outcome(callback.optimizer, meter.energy_source)
    record = trainer_run_record(trainer, w.result, meter, model_info, seq_len, outcome)

An epoch's end interrupts the limit being profiled and Zeus starts that limit again in the
next epoch, so every epoch must hold ``1 + warmup_steps + profile_steps`` optimizer steps or
profiling never ends; the callback refuses such a run when training begins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus.optimizer.power_limit import Done, GlobalPowerLimitOptimizer, HFGlobalPowerLimitOptimizer

from mlenergy.errors import UserError
from mlenergy.measure.provenance import collect_hardware, collect_software
from mlenergy.optimize.power_limit import limit_summary, zeus_selector
from mlenergy.records import Phase, PhaseResult, RunRecord, Workload

if TYPE_CHECKING:
    from mlenergy.measure import EnergyMeter
    from mlenergy.measure.window_result import WindowResult
    from mlenergy.records import ModelInfo, RunRecord


class MeterMonitor:
    """The meter's Zeus monitor as Zeus's optimizers see it, synchronising as the meter does.

    Args:
        meter: The project's energy meter (it must measure GPUs).
    """

    def __init__(self, meter: EnergyMeter) -> None:
        zeus = getattr(meter, "_zeus", None)
        if zeus is None or not meter.gpu_indices:
            raise UserError(
                "the meter measures no GPU, so no power limit can be set",
                "Create EnergyMeter(gpu_indices=[...]) on a machine with GPUs",
            )
        self._zeus = zeus
        self._sync = bool(meter.sync_execution)
        self.gpu_indices = list(meter.gpu_indices)

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Start a Zeus window (CUDA sync only when the meter syncs)."""
        self._zeus.begin_window(key, sync_execution=sync_execution and self._sync, restart=restart)

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False) -> Any:
        """End a Zeus window and return its measurement."""
        return self._zeus.end_window(
            key, sync_execution=sync_execution and self._sync, cancel=cancel
        )


def _zeus_optimizer_args(
    meter: EnergyMeter,
    objective: str,
    eta: float,
    max_slowdown: float,
    wait_steps: int,
    warmup_steps: int,
    profile_steps: int,
    pl_step_w: int,
    profile_path: str | Path | None,
) -> dict[str, Any]:
    """Keyword arguments of Zeus's power-limit optimizers: the meter's monitor, Zeus's selector."""
    monitor = MeterMonitor(meter)
    return {
        "monitor": monitor,
        "optimum_selector": zeus_selector(
            objective, eta, max_slowdown, world_size=len(monitor.gpu_indices)
        ),
        "wait_steps": wait_steps,
        "warmup_steps": warmup_steps,
        "profile_steps": profile_steps,
        "pl_step": pl_step_w,
        "profile_path": profile_path,
    }


def power_limit_optimizer(
    meter: EnergyMeter,
    objective: str = "zeus-cost",
    eta: float = 0.5,
    max_slowdown: float = 1.1,
    wait_steps: int = 1,
    warmup_steps: int = 10,
    profile_steps: int = 40,
    pl_step_w: int = 25,
    profile_path: str | Path | None = None,
) -> GlobalPowerLimitOptimizer:
    """Zeus's ``GlobalPowerLimitOptimizer`` on the meter's monitor with Zeus's selector.

    Call ``on_step_begin()`` (and ``on_step_end()``) around every training step.
    """
    return GlobalPowerLimitOptimizer(
        **_zeus_optimizer_args(
            meter,
            objective,
            eta,
            max_slowdown,
            wait_steps,
            warmup_steps,
            profile_steps,
            pl_step_w,
            profile_path,
        )
    )


class MeteredPowerLimitCallback(HFGlobalPowerLimitOptimizer):
    """Zeus's ``HFGlobalPowerLimitOptimizer`` that refuses epochs too short to profile a limit.

    Zeus cancels the limit being profiled at every epoch's end and profiles it again in the
    next epoch, so with fewer than ``1 + warmup_steps + profile_steps`` optimizer steps per
    epoch it never finishes and the limit stays at the maximum for the whole run.
    """

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Check that one epoch holds the steps that profiling one limit needs.

        Raises:
            UserError: The epochs are too short (checked when the data loader has a length).
        """
        plo = self.optimizer
        loader = kwargs.get("train_dataloader")
        if isinstance(plo.state, Done) or loader is None or not hasattr(loader, "__len__"):
            return
        per_epoch = math.ceil(len(loader) / max(int(args.gradient_accumulation_steps), 1))
        need = 1 + plo.warmup_steps + plo.profile_steps
        if per_epoch < need:
            raise UserError(
                f"an epoch has {per_epoch} optimizer steps but profiling one power limit needs "
                f"{need} (1 + warmup_steps {plo.warmup_steps} + profile_steps "
                f"{plo.profile_steps}); Zeus restarts the limit at every epoch's end",
                "Use fewer warmup/profile steps, or more batches per epoch",
            )


def hf_power_limit_callback(
    meter: EnergyMeter,
    objective: str = "zeus-cost",
    eta: float = 0.5,
    max_slowdown: float = 1.1,
    wait_steps: int = 1,
    warmup_steps: int = 10,
    profile_steps: int = 40,
    pl_step_w: int = 25,
    profile_path: str | Path | None = None,
) -> MeteredPowerLimitCallback:
    """Zeus's ``HFGlobalPowerLimitOptimizer`` (a ``TrainerCallback``) on the meter's monitor.

    Same arguments as :func:`power_limit_optimizer`; pass it in ``Trainer(callbacks=[...])``.
    Its ``.optimizer`` is the Zeus optimizer :func:`power_limit_outcome` reads.
    """
    return MeteredPowerLimitCallback(
        **_zeus_optimizer_args(
            meter,
            objective,
            eta,
            max_slowdown,
            wait_steps,
            warmup_steps,
            profile_steps,
            pl_step_w,
            profile_path,
        )
    )


@dataclass(frozen=True)
class PowerLimitOutcome:
    """What the optimizer chose and what it measured.

    Attributes:
        power_limit_w: The limit kept for the rest of training (W).
        choice: The chosen limit's time and energy over the profiled steps, the highest
            limit's, the saving and slowdown against it, and every measurement.
    """

    power_limit_w: int
    choice: dict[str, Any]


def power_limit_outcome(
    optimizer: GlobalPowerLimitOptimizer, energy_source: str
) -> PowerLimitOutcome:
    """The chosen limit and the saving measured while profiling, once profiling is done.

    Args:
        optimizer: A Zeus optimizer (for the HF callback: its ``.optimizer``).
        energy_source: Label of the meter's figures (``EnergyMeter.energy_source``).

    Raises:
        UserError: Profiling has not finished (train for more steps).
    """
    state = optimizer.state
    if not isinstance(state, Done):
        raise UserError(
            f"power-limit profiling is not finished (state {type(state).__name__})",
            "Train for more steps: wait + (warmup + profile) steps per limit, within epochs of "
            "at least 1 + warmup + profile steps",
        )
    chosen = state.optimal_power_limit // 1000
    choice = {
        "power_limit_w": chosen,
        **limit_summary(chosen, optimizer.measurements, optimizer.optimum_selector, energy_source),
    }
    return PowerLimitOutcome(chosen, choice)


def with_power_limit_tags(record: RunRecord, outcome: PowerLimitOutcome) -> RunRecord:
    """A copy of ``record`` whose tags carry the chosen limit and the measured saving."""
    c = outcome.choice
    tags = dict(record.tags)
    tags.update(
        {
            "power_limit_w": str(outcome.power_limit_w),
            "power_limit_selector": str(c["selector"]),
            "power_limit_energy_saving_fraction": f"{c['energy_saving_fraction']:.6f}",
            "power_limit_slowdown": f"{c['slowdown']:.6f}",
            "power_limit_profiled_w": ",".join(str(m["power_limit_w"]) for m in c["measurements"]),
            "power_limit_energy_source": str(c["energy_source"]),
        }
    )
    return record.model_copy(update={"tags": tags})


def trainer_run_record(
    trainer: Any,
    window: WindowResult,
    meter: EnergyMeter,
    model_info: ModelInfo,
    seq_len: int,
    outcome: PowerLimitOutcome,
    task: str = "training",
) -> RunRecord:
    """The run record of a Hugging Face ``Trainer`` run measured in one meter window.

    One ``train`` phase (the window's time and energy, ``steps x batch x seq_len`` tokens),
    the meter's hardware and software provenance, and the power-limit tags of
    :func:`with_power_limit_tags`.

    Args:
        trainer: The ``Trainer`` after ``train()``.
        window: The meter window around ``train()``.
        meter: The meter that measured it.
        model_info: The trained model (:func:`mlenergy.models.info.model_info_from_config`).
        seq_len: Tokens per training sequence.
        outcome: What :func:`power_limit_outcome` returned.
        task: Workload label.
    """
    args, steps = trainer.args, int(trainer.state.global_step)
    batch = int(args.train_batch_size) * int(args.gradient_accumulation_steps)
    batch *= max(int(args.world_size), 1)
    phase = PhaseResult.from_totals(
        Phase.TRAIN,
        window.duration_s,
        window.energy_j,
        steps * batch * seq_len,
        energy_by_device_j=window.energy_by_device_j if window.energy_j is not None else {},
    )
    start = window.start_time_s
    record = RunRecord(
        started_at=None if start is None else datetime.fromtimestamp(start, UTC),
        ended_at=None if start is None else datetime.fromtimestamp(start + window.duration_s, UTC),
        model=model_info,
        workload=Workload(
            kind="training",
            task=task,
            batch_size=batch,
            input_tokens=seq_len,
            output_tokens=0,
            num_requests=steps * batch,
            device=str(args.device),
            steps=steps,
            seq_len=seq_len,
        ),
        hardware=collect_hardware(meter),
        software=collect_software(),
        energy_source=window.energy_source,
        scope=meter.scope,
        phases=(phase,),
    )
    return with_power_limit_tags(record, outcome)
