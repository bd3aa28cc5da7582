"""Columns of the leaderboard's tables: names, header labels, tooltips with units, formats."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """A column the leaderboard can show.

    Attributes:
        name: Column name in the prepared frame.
        label: Header text.
        tooltip: What the column means, with its unit (shown on hover).
        fmt: ``"text"``, ``"int"`` or ``"float"`` (how to format values).
        hover: Column whose value is shown on hover over a cell (e.g. where a quality figure
            was published), or ``None``.
    """

    name: str
    label: str
    tooltip: str
    fmt: str = "text"
    hover: str | None = None


COLUMNS: tuple[Column, ...] = (
    Column("model_id", "Model", "Model id (Hugging Face id, local path or preset)"),
    Column("hardware", "Hardware", "Accelerator model (CPU model for CPU-only runs)"),
    Column("accelerator_count", "GPUs", "Accelerators used by the configuration (count)", "int"),
    Column("task", "Task", "Workload task label"),
    Column(
        "arch_kind",
        "Arch",
        "Dense, Mixture-of-Experts (MoE) or hybrid (Mamba/state-space layers with attention)",
    ),
    Column("dtype", "Precision", "Weight precision as run (bfloat16, fp8, mxfp4, float32...)"),
    Column("active_params_b", "Active params (B)", "Parameters used per token, billions", "float"),
    Column("total_params_b", "Total params (B)", "All parameters, billions", "float"),
    Column(
        "batch_size", "Batch", "Batch size; for serving runs the engine's max_num_seqs cap", "int"
    ),
    Column(
        "energy_per_token_j",
        "Energy/token (J)",
        "Energy per output token in joules (whole request; decode if no request figure)",
        "float",
    ),
    Column(
        "marks",
        "Marks",
        "host-bound: a measured run whose GPUs sat near their idle power most of the time "
        "(its own record says so), or of a configuration the estimator's host-bound rule flags "
        "(host-bound steps at low power); its energy per token measures a host stall; "
        "unverified: a submission lacking the provenance a real measurement records. Hover a "
        "mark for why",
        hover="marks_why",
    ),
    Column("itl_ms", "ITL p50 (ms)", "Median inter-token latency in milliseconds", "float"),
    Column(
        "throughput_tokens_per_s",
        "Throughput (tok/s)",
        "Output tokens per second of the whole configuration",
        "float",
    ),
    Column("avg_power_w", "Power (W)", "Average power of the measured scope in watts", "float"),
    Column(
        "tokens_per_j",
        "Tokens/J",
        "Output tokens per joule = tokens per second per watt (higher is better)",
        "float",
    ),
    Column(
        "quality",
        "Quality",
        "Quality figure of the same model (see the Quality figure menu); a published score was "
        "not measured in this run (hover a cell for its source)",
        "float",
        hover="quality_link",
    ),
    Column(
        "energy_per_correct_j",
        "Energy/correct (J)",
        "Energy per correct answer in joules = energy per response / (accuracy % / 100); "
        "only where the quality figure is an accuracy in %",
        "float",
    ),
    Column(
        "quality_source",
        "Quality source",
        "Where the quality figure came from: published:<benchmark> (published by the model's "
        "maker or a public leaderboard) or measured:<task / metric> (a stored evaluation)",
    ),
    Column(
        "n_configs", "Configs", "Configurations of this model x hardware that were compared", "int"
    ),
    Column("source_kind", "Source", "measured / modelled / estimated / emulated / reference"),
    Column(
        "method",
        "Method",
        "How the run was measured: serving-steady-state (an engine serving requests, its "
        "steady-state window) or static-batch (fixed batches), then how static batches "
        "decoded: eager (a Python call per token) or compiled-static-cache (compiled, CUDA "
        "graphs); the two do not compare",
    ),
    Column("energy_source", "Energy source", "Exact label of where the energy figure came from"),
    Column("submitter", "Submitter", "Who submitted the run (empty for local runs)"),
    Column("run_id", "Run id", "Unique id of the run (open it in Model detail)"),
)
DETAIL_ONLY: tuple[Column, ...] = (
    Column(
        "energy_per_response_j",
        "Energy/response (J)",
        "Energy per response in joules = energy per output token x output tokens per request",
        "float",
    ),
    Column(
        "avg_batch_size",
        "Avg batch",
        "Mean sequences the engine ran at once (serving: its /metrics), else achieved concurrency",
        "float",
    ),
    Column("tensor_parallel", "TP", "Tensor-parallel degree", "int"),
    Column("expert_parallel", "EP", "Expert-parallel degree", "int"),
    Column("data_parallel", "DP", "Data-parallel degree", "int"),
    Column("pipeline_parallel", "PP", "Pipeline-parallel degree", "int"),
    Column("input_tokens", "Input tokens", "Prompt tokens per request (0: not published)", "int"),
    Column("output_tokens", "Output tokens", "Generated tokens per request", "int"),
    Column(
        "request_energy_j_ci95_low",
        "Energy CI95 low (J)",
        "95% CI of the run energy, joules",
        "float",
    ),
    Column(
        "request_energy_j_ci95_high",
        "Energy CI95 high (J)",
        "95% CI of the run energy, joules",
        "float",
    ),
    Column(
        "interval",
        "Interval from",
        "What the run's 95% intervals come from: within-run (the repeats of one process, "
        "which miss what changes between processes) or between-runs (fresh processes or "
        "server launches), with how many",
    ),
    Column("itl_p90_s", "ITL p90 (s)", "90th-percentile inter-token latency in seconds", "float"),
    Column("itl_p99_s", "ITL p99 (s)", "99th-percentile inter-token latency in seconds", "float"),
    Column("ttft_s", "TTFT (s)", "Time to first token in seconds", "float"),
    Column(
        "idle_power_w", "Idle power (W)", "Power of the measured scope while idle, watts", "float"
    ),
    Column("repeats", "Repeats", "Measured repeats behind the figures", "int"),
    Column("quality_link", "Quality link", "How the quality figure was linked to this run"),
    Column("created_at", "Created", "When the run was recorded (UTC)"),
)
"""Columns shown in the model detail view only."""
FOOTPRINT: tuple[Column, ...] = (
    Column(
        "carbon_g_per_1k_tokens",
        "gCO2e/1k tok",
        "Grams of CO2e per 1,000 output tokens = energy per token x 1,000 x PUE x grid intensity "
        "(g/kWh) / 3.6e6; derived at view time from the region or intensity picked above",
        "float",
    ),
    Column(
        "cost_per_m_tokens",
        "Cost/M tok",
        "Electricity cost per million output tokens = energy per token x 1e6 x PUE x price per "
        "kWh / 3.6e6, in the price's currency; derived at view time",
        "float",
    ),
)
"""Carbon and cost columns, shown after the energy column when the reader sets them (see
:mod:`mlenergy.leaderboard.footprint_view`)."""


def with_footprint(columns: tuple[Column, ...]) -> tuple[Column, ...]:
    """``columns`` with :data:`FOOTPRINT` right after the energy-per-token column."""
    out: list[Column] = []
    for c in columns:
        out.append(c)
        if c.name == "energy_per_token_j":
            out.extend(FOOTPRINT)
    return tuple(out) if len(out) > len(columns) else (*columns, *FOOTPRINT)


HOVER_ONLY: tuple[str, ...] = (
    "marks_why",
    "host_bound",
    "unverified",
    "unverified_reasons",
)
"""Columns given to the API and shown on hover (of *Marks*), never as a table column."""

COLUMN_BY_NAME = {c.name: c for c in (*COLUMNS, *DETAIL_ONLY, *FOOTPRINT)}
SORTABLE = tuple(c.name for c in COLUMNS)
DEFAULT_SORT = "energy_per_token_j"
