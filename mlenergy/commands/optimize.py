"""``mlenergy optimize``: spend fewer joules (pipeline clocks, power limits, site power caps).

Bad input ends with one ``error:`` line naming the row or field and exit code 2; every check
runs before any file is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from mlenergy import strict_json
from mlenergy.commands.options import (
    CarbonIntensityOption,
    DataDirOption,
    RegionOption,
    resolve_data_dir,
)
from mlenergy.commands.typed import typed_command
from mlenergy.errors import UserError
from mlenergy.footprint import Footprint
from mlenergy.optimize.candidates import parse_power_limits
from mlenergy.optimize.power_cap import PowerCapResult, plan_power_cap, summary_lines
from mlenergy.optimize.power_limit import (
    choose_power_limit,
    profile_source,
    read_power_limit_profile,
)
from mlenergy.optimize.site import SITE_HOST_W_PER_GPU, SITE_PUE
from mlenergy.records.metrics import DEFAULT_ITL_LIMIT_MS

optimize_app = typer.Typer(
    name="optimize",
    help="Plan lower-energy runs: pipeline frequency plans, power limits, site power caps.",
    no_args_is_help=True,
)


@optimize_app.command("pipeline")
def pipeline(
    microbatches: Annotated[int, typer.Option(help="Microbatches per iteration.")],
    profile: Annotated[
        str | None,
        typer.Option(
            help="Profile CSV (stage,instruction,frequency_mhz,time_s,energy_j) or a shipped "
            "profile: perseus:gpt3-175b-a40, perseus:bloom-176b-a40, perseus:gpt3-175b-a100, "
            "perseus:bloom-176b-a100."
        ),
    ] = None,
    p_blocking: Annotated[
        float | None,
        typer.Option(
            help="Power of a GPU blocked on communication or idle (W); default for the "
            "shipped Perseus profiles: the paper's figure for their GPU (A40 70.38, A100 83.64)."
        ),
    ] = None,
    time_unit: Annotated[
        float | None,
        typer.Option(
            help="Time step of the solver's search (s); default 0.0005 (real accounting: "
            "reported times are the profile's own) or 0.001 (perseus: the paper's A100 step; its "
            "A40 frontiers used 0.0001)."
        ),
    ] = None,
    schedule: Annotated[str, typer.Option(help="Pipeline schedule.")] = "1f1b",
    frontier_out: Annotated[
        Path | None, typer.Option(help="Write the frontier CSV iteration_time_s,energy_j.")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write the plan JSON.")] = None,
    straggler_time: Annotated[
        float | None, typer.Option(help="Finish by this straggler's iteration time (s).")
    ] = None,
    straggler_slowdown: Annotated[
        float | None, typer.Option(help="Straggler time as a multiple of the shortest time.")
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG of the frontier.")] = None,
    zeus_plan: Annotated[
        Path | None,
        typer.Option(
            help="Write the plan for Zeus's PointSolution scheduler (a .py file that says how "
            "to serve it to PipelineFrequencyOptimizer)."
        ),
    ] = None,
    solver: Annotated[
        str, typer.Option(help="fast (default) or lowtime (same answer, slower).")
    ] = "fast",
    accounting: Annotated[
        str,
        typer.Option(
            help="real (default): the profile's own times and energies; perseus: the Perseus "
            "solver's model figures, as the paper published them (times rounded down, fitted "
            "costs)."
        ),
    ] = "real",
    from_estimate: Annotated[
        bool, typer.Option("--from-estimate", help="Build the profile with the estimator.")
    ] = False,
    model: Annotated[str | None, typer.Option(help="Model id or config (--from-estimate).")] = None,
    gpu: Annotated[
        str | None, typer.Option(help="GPU name or spec file (--from-estimate).")
    ] = None,
    stages: Annotated[int, typer.Option(help="Pipeline stages (--from-estimate).")] = 1,
    tensor_parallel: Annotated[int, typer.Option(help="Tensor parallel per stage.")] = 1,
    microbatch_size: Annotated[int, typer.Option(help="Sequences per microbatch.")] = 1,
    seq_len: Annotated[int, typer.Option(help="Tokens per sequence.")] = 2048,
    layers_per_stage: Annotated[
        str | None, typer.Option(help="Comma-separated layers per stage (default: even).")
    ] = None,
    data_parallel: Annotated[
        int, typer.Option(help="Data-parallel degree sharding Adam states (--from-estimate).")
    ] = 1,
    profile_out: Annotated[
        Path | None, typer.Option(help="Write the estimated profile CSV.")
    ] = None,
) -> None:
    """Frequency plan of a pipeline-parallel training iteration (Perseus-style, on lowtime)."""
    from mlenergy.optimize.pipeline import summary_lines
    from mlenergy.optimize.pipeline_command import (
        EstimateOptions,
        PipelineOutputs,
        run_pipeline_command,
    )

    estimate = None
    if from_estimate:
        estimate = EstimateOptions(
            model, gpu, stages, tensor_parallel, microbatch_size, seq_len, layers_per_stage,
            data_parallel,
        )  # fmt: skip
    run = run_pipeline_command(
        microbatches,
        profile=profile,
        estimate=estimate,
        p_blocking_w=p_blocking,
        time_unit_s=time_unit,
        schedule=schedule,
        straggler_time_s=straggler_time,
        straggler_slowdown=straggler_slowdown,
        solver=solver,
        accounting=accounting,
        outputs=PipelineOutputs(frontier_out, out, zeus_plan, plot, profile_out),
    )
    for line in summary_lines(run.result):
        typer.echo(line)
    for p in run.written:
        typer.echo(f"wrote {p}")
    if zeus_plan is not None:
        typer.echo(
            f"{zeus_plan}: serve it with Zeus's PointSolution scheduler to "
            "PipelineFrequencyOptimizer; the comments at its top say how"
        )


@optimize_app.command("power-limit")
def power_limit(
    profile: Annotated[
        Path, typer.Option(help="CSV power_limit_w,time_s,energy_j or Zeus's JSON profile.")
    ],
    objective: Annotated[
        str, typer.Option(help="energy, time, zeus-cost or max-slowdown (Zeus's selectors).")
    ] = "zeus-cost",
    eta: Annotated[float, typer.Option(help="Zeus cost knob: 0 = time only, 1 = energy.")] = 0.5,
    max_slowdown: Annotated[
        float, typer.Option(help="Largest allowed slowdown (max-slowdown).")
    ] = 1.1,
    world_size: Annotated[int, typer.Option(help="GPUs of the job (zeus-cost).")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The GPU power limit Zeus's own selector picks from a measured power-limit profile."""
    rows = read_power_limit_profile(profile)
    source = profile_source(profile) or f"profile:{profile.name}"
    out = choose_power_limit(rows, objective, eta, max_slowdown, world_size, energy_source=source)
    if as_json:
        typer.echo(strict_json.dumps(out, indent=2))
        return
    typer.echo(
        f"power limit: {out['power_limit_w']} W ({out['selector'].rsplit('.', 1)[-1]}, "
        f"objective {objective})"
    )
    typer.echo(
        f"  {out['time_s']:.4g} s, {out['energy_j']:.4g} J vs {out['max_limit_time_s']:.4g} s, "
        f"{out['max_limit_energy_j']:.4g} J at {out['max_power_limit_w']} W: "
        f"{100 * out['energy_saving_fraction']:.1f}% less energy, "
        f"{100 * (out['slowdown'] - 1):.1f}% slower (energy source {out['energy_source']})"
    )


@dataclass(frozen=True)
class PowerCapQuery:
    """A site power cap, the model and task it serves, the deadline, the candidates weighed."""

    budget_w: float
    """Site power budget (W)."""
    model: str
    """Model id."""
    task: str
    """Workload, e.g. lm-arena-chat."""
    itl_limit_ms: float = DEFAULT_ITL_LIMIT_MS
    """Deadline on median inter-token latency (ms)."""
    sources: str = "measured"
    """measured, estimated or all."""
    objective: str = "throughput"
    """throughput (site tokens/s) or energy-per-token."""
    pue: float = SITE_PUE
    """Power usage effectiveness of the site."""
    host_w_per_gpu: float = SITE_HOST_W_PER_GPU
    """Host power per GPU (W)."""
    peak_factor: float = 1.0
    """Peak over average GPU power (>= 1): the budget holds the peak, not the average."""
    gpus: str | None = None
    """GPUs to estimate for (comma-separated)."""
    precisions: str | None = None
    """Weight precisions to estimate for (comma-separated)."""
    power_limits: str | None = None
    """Per-GPU power limits to estimate, LOW:HIGH:STEP (W)."""
    price_kwh: float | None = None
    """Electricity price per kWh (no cost is shown without one)."""
    reference: Path | None = None
    """Reference data folder."""
    data_dir: DataDirOption = None

    def plan(self) -> PowerCapResult:
        """The best configuration under the cap (``plan_power_cap``).

        Raises:
            UserError: Bad values, or no configuration that fits.
        """
        return plan_power_cap(
            self.budget_w, self.model, self.task, self.itl_limit_ms, sources=self.sources,
            objective=self.objective, pue=self.pue, host_w_per_gpu=self.host_w_per_gpu,
            price_kwh=self.price_kwh, reference=self.reference,
            data_dir=resolve_data_dir(self.data_dir),
            gpus=self.gpus.split(",") if self.gpus else None,
            precisions=self.precisions.split(",") if self.precisions else None,
            power_limits=parse_power_limits(self.power_limits), peak_factor=self.peak_factor,
        )  # fmt: skip


@dataclass(frozen=True)
class PowerCapOutput:
    """How the plan is shown: carbon beside it, JSON, a chart."""

    carbon_intensity: CarbonIntensityOption = None
    region: RegionOption = None
    as_json: bool = field(default=False, metadata={"cli": {"flags": ("--json",)}})
    """Print JSON."""
    plot: Path | None = None
    """Write the interactivity chart (PNG)."""
    plot_metric: str = "site-tokens"
    """Chart y axis: site-tokens (tokens/s) or tokens-per-watt."""


@optimize_app.command("power-cap")
@typed_command
def power_cap(query: PowerCapQuery, show: PowerCapOutput) -> None:
    """The configuration that serves the most tokens per second under a site power cap."""
    from mlenergy.optimize.pipeline import check_outputs  # lowtime, which loads matplotlib

    check_outputs(show.plot)
    # The planner's energy per token is site energy (PUE and host power included already).
    carbon = Footprint.from_options(show.carbon_intensity, show.region, None, None)
    if show.plot_metric not in ("site-tokens", "tokens-per-watt"):
        raise UserError(
            f"--plot-metric {show.plot_metric!r} is unknown", "Use site-tokens or tokens-per-watt"
        )
    result = query.plan()
    if show.plot is not None:
        from mlenergy.optimize.plots import plot_power_cap  # matplotlib: loaded for a chart

        plot_power_cap(result, show.plot, metric=show.plot_metric)
    if show.as_json:
        typer.echo(strict_json.dumps(_power_cap_json(result, carbon), indent=2))
        return
    for line in summary_lines(result):
        typer.echo(line)
    if carbon is not None and carbon.intensity is not None:
        grams = carbon.per_token(result.best["energy_per_token_j"])["carbon_g_per_1k_tokens"]
        typer.echo(
            f"best: carbon {grams:.4g} gCO2e per 1k tokens (site energy, PUE "
            f"{result.site.pue:g} included) at {carbon.intensity.label()}"
        )
    if show.plot is not None:
        typer.echo(f"wrote {show.plot}")


def _power_cap_json(result: PowerCapResult, carbon: Footprint | None) -> dict:
    """The plan as JSON: its figures, the cost per 1M tokens, and carbon if asked."""
    payload = result.to_json()
    payload["cost_per_m_tokens"] = payload["energy_cost_per_million_tokens"]
    if carbon is not None:
        payload.update(carbon.per_token(result.best["energy_per_token_j"]))
        payload["footprint"] = carbon.describe() | {"pue": result.site.pue}
    return payload


def register(app: typer.Typer) -> None:
    """Add the ``optimize`` group to the root app."""
    app.add_typer(optimize_app, name="optimize")
