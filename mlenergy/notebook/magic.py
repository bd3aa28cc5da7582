"""The ``%%energy`` cell magic: measure a cell with the project's meter, show it, keep it.

::

    %load_ext mlenergy.notebook
    %%energy [--var NAME] [--name WINDOW] [--quiet] [--model VAR] [--gpu-indices 0,1]
             [--generation auto|eager|compiled-static-cache] [--warmup N]
             [--save --model VAR --tokens N [--batch-size B] [--data-dir DIR]]

(``--data-dir`` defaults to ``$MLENERGY_DATA_DIR``, else ``./data``, as the commands do.)

Which devices a cell measures follows the scope rule of :mod:`mlenergy.measure.scope`, as bench
does: the GPUs of ``--model`` (a ``LoadedModel`` variable), or ``--gpu-indices``, or else the GPUs
this process holds memory on when the cell starts; CPU package and DRAM energy, where readable,
are shown beside the GPU total, never in it. A cell shorter than ten counter periods is marked,
and ``--save`` refuses it (repeat the work inside the cell).

The cell runs inside a :class:`~mlenergy.measure.window.MeasuredWindow` of one
:class:`~mlenergy.measure.EnergyMeter` shared by the session (Zeus; on a machine without
energy counters the CPU power model, labelled ``modelled:cpu-tdp``). A small table shows time,
energy per device, average power and source; the window is kept in ``--var`` (default
``energy_result``). ``--save`` appends a run record to the store: it needs the model that ran
(``--model``: a variable holding a ``LoadedModel`` or ``ModelInfo``) and the tokens the cell
generated (``--tokens``), so that the record describes what ran rather than inventing it.
When the cell raises, its window is cancelled and ``--var`` holds that failed window, so that
an earlier cell's figures are never read as this cell's (reading it raises ``WindowFailed``).

How ``model.generate`` decodes in the cell: with ``--model`` naming a ``LoadedModel``,
``--generation`` (default ``auto``: ``compiled-static-cache`` on CUDA, ``eager`` elsewhere, as
bench) sets its ``generation_config.cache_implementation`` (``"static"``: transformers then
compiles the decode forward, CUDA graphs, on a GPU). ``--warmup N`` runs the cell N times
before the window opens (default: once under ``compiled-static-cache``, so that compilation
never falls in the window; else 0) and prints that time apart. A saved record keeps the
backend, the versions, the warm-up time and, for MoE models, the experts backend as set on
the model.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from mlenergy.errors import UserError
from mlenergy.measure import measured_gpus, meter_for
from mlenergy.measure.provenance import collect_hardware, collect_software
from mlenergy.measure.scope import parse_gpu_indices
from mlenergy.measure.window import MeasuredWindow, window_html
from mlenergy.models import LoadedModel
from mlenergy.models.experts import current_experts_backend
from mlenergy.records import GenerationInfo, ModelInfo, Phase, PhaseResult, RunRecord, Workload
from mlenergy.records.generation import GenerationBackend
from mlenergy.store import RunStore
from mlenergy.workloads.backends import resolve_generation

DEFAULT_VAR = "energy_result"


class _CellFailed(Exception):
    """The measured cell raised (IPython has shown the error); its window is cancelled."""


def window_record(
    window: MeasuredWindow,
    meter: Any,
    model_info: Any,
    tokens: int,
    batch_size: int = 1,
    cell: str = "",
    generation: Any = None,
) -> Any:
    """A run record of a finished window: one request phase over the cell's tokens.

    Args:
        window: The finished window.
        meter: The meter that measured it (for hardware and scope).
        model_info: :class:`~mlenergy.records.ModelInfo` of the model that ran.
        tokens: Tokens the cell generated in total (>= 1).
        batch_size: Sequences generated together.
        cell: The cell's source (its hash is kept in the tags).
        generation: How ``model.generate`` decoded (a
            :class:`~mlenergy.records.GenerationInfo`), or ``None`` when not known.
    """
    r = window.result
    if not r.resolvable:
        raise UsageError(
            f"the cell ran {r.duration_s:.3g} s, shorter than ten energy-counter periods "
            f"({r.counter_period_s:.3g} s each): its energy cannot be saved; repeat the work "
            "inside the cell"
        )
    phase = PhaseResult.from_totals(
        Phase.REQUEST,
        r.duration_s,
        r.energy_j,
        tokens,
        energy_by_device_j=r.energy_by_device_j,
        host_energy_j=r.host_energy_j,
        host_energy_by_device_j=r.host_energy_by_device_j,
    )
    return RunRecord(
        model=model_info,
        workload=Workload(
            kind="inference",
            task="notebook-cell",
            batch_size=batch_size,
            input_tokens=0,
            output_tokens=max(1, math.ceil(tokens / batch_size)),
            num_requests=batch_size,
            prompt_source="notebook cell",
        ),
        hardware=collect_hardware(meter),
        software=collect_software(),
        energy_source=r.energy_source,
        scope=meter.scope,
        phases=(phase,),
        generation=generation,
        tags={
            "origin": "notebook %%energy",
            "input_tokens": "unknown",
            "cell_sha256": hashlib.sha256(cell.encode()).hexdigest()[:16],
        },
    )


def store_dir(value: str | None) -> Path:
    """The store ``--save`` writes to: ``value``, else ``$MLENERGY_DATA_DIR``, else ``./data``.

    The same default as the ``mlenergy`` commands, so a notebook under ``notebooks/`` can save
    into the project's store by setting the variable once.
    """
    return Path(value or os.environ.get("MLENERGY_DATA_DIR") or "data")


def _model_info(shell: Any, name: str) -> Any:

    if name not in shell.user_ns:
        raise UsageError(f"--model {name}: no such variable in the notebook")
    obj = shell.user_ns[name]
    info = getattr(obj, "info", obj)
    if not isinstance(info, ModelInfo):
        raise UsageError(f"--model {name}: not a LoadedModel or ModelInfo ({type(obj).__name__})")
    return info


def apply_generation(obj: Any, policy: str) -> GenerationBackend:
    """Set how ``obj.model.generate`` decodes; return the backend (``eager`` or compiled).

    Args:
        obj: A ``LoadedModel`` (its ``model`` and ``device`` are read).
        policy: ``auto``, ``eager`` or ``compiled-static-cache``.

    Raises:
        UsageError: For a bad policy or a model class that cannot compile.
    """
    try:
        backend = resolve_generation(policy, obj.model, str(obj.device))
    except UserError as err:
        raise UsageError(str(err)) from None
    from transformers.generation.configuration_utils import CompileConfig

    # lazy: torch, only when a cell measures a model
    from mlenergy.workloads.generation import compile_mode

    config = obj.model.generation_config
    if backend == "compiled-static-cache":
        config.cache_implementation = "static"
        config.compile_config = CompileConfig(mode=compile_mode(str(obj.device)))
        # generate compiles on CUDA by itself; elsewhere only when told to
        config.compile_config._compile_all_devices = True
        config.disable_compile = False
    else:
        config.cache_implementation = None
        config.disable_compile = True
    return backend


def generation_info(obj: Any, backend: GenerationBackend, warmup_s: float) -> Any:
    """The record's :class:`~mlenergy.records.GenerationInfo` of a cell's ``model.generate``.

    The experts backend is the one set on the model (``as-set``); transformers' ``generate``
    decodes a ``grouped_mm`` model with ``batched_mm`` on a GPU (docs/measure.md).
    """
    # lazy: torch, only when a cell measures a model
    from mlenergy.workloads.generation import compile_mode

    software = collect_software()
    experts = current_experts_backend(obj.model)
    compiled = backend == "compiled-static-cache"
    return GenerationInfo(
        backend=backend,
        torch=software.torch or "unknown",
        transformers=software.transformers or "unknown",
        compile_mode=compile_mode(str(obj.device)) if compiled else None,
        warmup_s=warmup_s,
        experts_backend=experts,
        experts_backend_source="as-set" if experts else None,
    )


@magics_class
class EnergyMagics(Magics):
    """The ``%%energy`` magic; one meter per IPython session and device scope, opened on use."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._meter: Any = None

    @property
    def _shell(self) -> Any:
        """The IPython shell the magic runs in (given when the extension registers it)."""
        if self.shell is None:
            raise UsageError("%%energy runs inside an IPython shell")
        return self.shell

    @property
    def meter(self) -> Any:
        """The session's :class:`~mlenergy.measure.EnergyMeter` (the last cell's scope)."""
        if self._meter is None:
            self._meter = self.meter_for(None, None)
        return self._meter

    def meter_for(self, where: Any, gpu_indices: list[int] | None) -> Any:
        """The meter over the devices the scope rule picks; reused while the scope holds."""
        gpus = measured_gpus(where, gpu_indices)
        if self._meter is not None and list(self._meter.gpu_indices) == gpus:
            return self._meter
        self.close()
        self._meter = meter_for(where, gpus)
        return self._meter

    def close(self) -> None:
        """Close the session's meter."""
        if self._meter is not None:
            self._meter.close()
            self._meter = None

    @magic_arguments()
    @argument("--var", default=DEFAULT_VAR, help="Variable that keeps the result.")
    @argument("--name", default="cell", help="Name of the measured window.")
    @argument("--quiet", action="store_true", help="Do not show the table.")
    @argument("--save", action="store_true", help="Append a run record to the store.")
    @argument(
        "--model",
        default=None,
        help="Variable of the model that ran (its GPUs are measured; needed by --save).",
    )
    @argument("--gpu-indices", default=None, help="GPUs to measure, e.g. 0,1 (none: no GPU).")
    @argument(
        "--generation",
        default=None,
        help="How --model's generate decodes: auto (default; compiled-static-cache on CUDA, "
        "eager elsewhere), eager, compiled-static-cache.",
    )
    @argument(
        "--warmup",
        type=int,
        default=None,
        help="Unmeasured runs of the cell first (default: 1 when compiled, else 0).",
    )
    @argument("--tokens", type=int, default=None, help="With --save: tokens the cell generated.")
    @argument("--batch-size", type=int, default=1, help="With --save: sequences generated.")
    @argument(
        "--data-dir",
        default=None,
        help="With --save: store folder (default: $MLENERGY_DATA_DIR, else ./data).",
    )
    @cell_magic
    def energy(self, line: str, cell: str) -> None:
        """Measure the cell's time and energy; show and keep the result."""
        args = parse_argstring(self.energy, line)
        if not args.var.isidentifier():
            raise UsageError(f"--var {args.var!r} is not a Python name")
        if args.save and (args.model is None or args.tokens is None or args.tokens < 1):
            raise UsageError("--save needs --model VAR (the model that ran) and --tokens N >= 1")
        if args.batch_size < 1:
            raise UsageError("--batch-size must be at least 1")
        if args.warmup is not None and args.warmup < 0:
            raise UsageError("--warmup must be at least 0")
        info = _model_info(self.shell, args.model) if args.save else None
        where, gpus = self._scope(args)
        backend = self._generation(args, where)
        warmup = args.warmup if args.warmup is not None else int(backend == "compiled-static-cache")
        warmup_s = self._warm_up(cell, warmup)
        if warmup_s is None:
            return
        meter = self.meter_for(where, gpus)
        window = MeasuredWindow(args.name, meter)
        try:
            with window:
                if not self._shell.run_cell(cell).success:
                    raise _CellFailed
        except _CellFailed:
            # The failed window replaces any earlier result: reading it raises WindowFailed.
            self._shell.user_ns[args.var] = window
            print(f"%%energy: the cell raised; no energy is kept ({args.var} has no result)")
            return
        self._shell.user_ns[args.var] = window
        if not args.quiet:
            from IPython.display import HTML, display

            display(HTML(window_html(window.result)))
        if args.save:
            generation = generation_info(where, backend, warmup_s) if backend else None
            self._save(window, info, args, cell, generation)

    def _generation(self, args: Any, where: Any) -> GenerationBackend | None:
        """Apply ``--generation`` to the ``--model`` LoadedModel; ``None`` without one."""
        if not isinstance(where, LoadedModel):
            if args.generation is not None:
                raise UsageError("--generation needs --model VAR naming a LoadedModel")
            return None
        return apply_generation(where, args.generation or "auto")

    def _warm_up(self, cell: str, runs: int) -> float | None:
        """Run the cell ``runs`` times unmeasured; its seconds, or ``None`` if it raised."""
        if runs == 0:
            return 0.0
        t0 = time.perf_counter()
        for _ in range(runs):
            if not self._shell.run_cell(cell).success:
                print("%%energy: the warm-up run raised; nothing was measured")
                return None
        seconds = time.perf_counter() - t0
        print(f"%%energy: warm-up and compilation {seconds:.3g} s ({runs} run(s), not measured)")
        return seconds

    def _scope(self, args: Any) -> tuple[Any, list[int] | None]:
        """What the cell runs (the ``--model`` variable) and the ``--gpu-indices`` override."""
        where = None
        if args.model is not None:
            if args.model not in self._shell.user_ns:
                raise UsageError(f"--model {args.model}: no such variable in the notebook")
            obj = self._shell.user_ns[args.model]
            where = obj if hasattr(obj, "model") or hasattr(obj, "parameters") else None
        try:
            return where, parse_gpu_indices(args.gpu_indices)
        except UserError as err:
            raise UsageError(str(err)) from None

    def _save(
        self, window: MeasuredWindow, info: Any, args: Any, cell: str, generation: Any = None
    ) -> None:
        record = window_record(
            window, self.meter, info, args.tokens, args.batch_size, cell, generation
        )
        store = RunStore(store_dir(args.data_dir))
        result = store.append([record])
        print(f"saved run {record.run_id} to {store.data_dir} (added {result.added})")
