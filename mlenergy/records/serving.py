"""Serving figures of a run measured against a serving engine under load.

A serving record (``Workload.method == "serving-steady-state"``) keeps its headline in the
``request`` phase, as the reference rows do: energy, duration and output tokens of the
steady-state window. :class:`ServingStats` holds everything else a serving benchmark reports:
the load that was offered, latency percentiles, the whole run's energy beside the window's and
the energy of each request.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mlenergy.records.base import FrozenModel, NonNegFloat, NonNegInt, PosInt

MIN_COUNTER_PERIODS = 10
"""A window shorter than this many update periods of its energy counter gives no figure: each
edge may be off by a whole period."""

SPLIT_WINDOW_AGREEMENT = 0.02
"""Per-request energies are kept only when the split's power samples, integrated over the
steady-state window, are within this fraction of the window's counter energy."""


class Percentiles(FrozenModel):
    """The 50th, 90th and 99th percentiles (and mean) of one per-request figure.

    Units are those of the field that holds it (named in its docstring).

    Attributes:
        p50: Median (linear interpolation between samples).
        p90: 90th percentile.
        p99: 99th percentile.
        mean: Arithmetic mean.
    """

    p50: NonNegFloat
    p90: NonNegFloat
    p99: NonNegFloat
    mean: NonNegFloat


class EngineMetrics(FrozenModel):
    """What the engine's Prometheus ``/metrics`` said during the steady-state window.

    Attributes:
        samples: Scrapes taken inside the window.
        running_mean: Mean requests the engine was running (count).
        waiting_mean: Mean requests waiting in the engine's queue (count).
        kv_cache_usage_mean: Mean KV-cache use as a fraction in [0, 1].
    """

    samples: PosInt
    running_mean: NonNegFloat | None = None
    waiting_mean: NonNegFloat | None = None
    kv_cache_usage_mean: NonNegFloat | None = None


class ServingStats(FrozenModel):
    """A serving run's load, latencies and energies beyond the steady-state headline.

    Attributes:
        endpoint_api: ``chat`` (``/v1/chat/completions``) or ``completions``
            (``/v1/completions``), both streamed.
        engine: The serving engine and its version as the server told it (``/version``,
            ``/v1/models``, ``/metrics``), else as given with ``--engine``; ``None`` if unknown.
        engine_version_source: Where ``engine`` came from (``/version``, ``--engine``...).
        launched: True when mlenergy started the server for this level (``--launch``).
        concurrency: The level: most requests in flight at once (client cap, and the
            server's ``max_num_seqs`` when launched with ``{max_num_seqs}``).
        request_rate_per_s: Mean arrival rate in requests per second; ``None`` means all
            requests at once (``inf``).
        burstiness: Shape of the gamma inter-arrival distribution (1.0: Poisson); ``None``
            when all requests arrive at once.
        seed: Seed of prompts and arrivals.
        max_output_tokens: Output cap per request in tokens.
        ignore_eos: Whether end-of-sequence was ignored by the server.
        ignore_eos_via: How it was asked (``ignore_eos``, ``generation_config``) or ``None``.
        outputs_ended_early: Requests that stopped before ``max_output_tokens`` (count).
        requests_completed: Requests that finished without error (count).
        requests_failed: Requests that ended in an error (count).
        input_tokens_total: Prompt tokens over all completed requests (server's count when
            reported, else the client's estimate).
        output_tokens_total: Output tokens over all completed requests.
        window_start_s: Steady-state window start in seconds after the first request.
        window_end_s: Steady-state window end in seconds after the first request.
        window_output_tokens: Output tokens produced inside the window (count).
        achieved_concurrency: Time-averaged requests the client had in flight inside the
            window (count): sent and not ended, whether the server ran them or queued them.
        batch_source: Where ``workload.avg_batch_size`` comes from: ``server`` (the mean of
            the server's running requests in the window, from its ``/metrics``, as the
            reference rows report it) or ``client`` (``achieved_concurrency``, when the
            server says nothing).
        server_cap: Most requests the server runs at once, when known (count).
        server_cap_source: How ``server_cap`` is known: ``--launch {max_num_seqs}``,
            ``/metrics`` (most running while requests waited) or ``client`` (most requests
            decoding at once while others were held back).
        level_above_server_cap: True when requests waited in the server's queue because the
            level is above its cap: the server's batch is then its cap, not the level.
        window_counter_periods: Length of the window in update periods of the slowest energy
            counter in scope (``scope.counter_period_s``); ``None`` for a continuous counter or
            none. Windows shorter than ten are failed points, never figures.
        run_duration_s: Seconds from the first request sent to the last one finished.
        run_energy_j: Energy of the whole run in joules (same scope as the window).
        run_energy_per_token_j: ``run_energy_j`` over all output tokens, joules per token.
        ttft_s: Time to first token, seconds.
        tpot_s: Time per output token after the first, seconds (per request).
        itl_s: Inter-token latency between streamed chunks, seconds.
        e2e_latency_s: End-to-end latency of a request, seconds.
        request_energy_j: Energy of one request, joules (the power samples split by the work
            each request gave the server; see docs/serve-benchmark.md).
        request_energy_per_token_j: A request's energy over its output tokens, joules/token.
        request_energies_j: Every completed request's energy in joules (the distribution).
        request_output_tokens: Every completed request's output tokens, in the same order.
        split_energy_j: Sum of the requests' energies, joules: the power samples' energy over
            the time at least one request was in the server.
        split_span_s: Seconds during which at least one request was in the server.
        split_window_energy_j: The split's power samples integrated over the steady-state
            window, joules; within 2% of the window's counter energy, or the per-request
            energies are withheld.
        split_costs: What the split fitted on the run: ``step_j`` (J per decode step),
            ``decode_token_j`` and ``prompt_token_j`` (J per token), ``idle_w`` (W drawn at
            all times, the measured idle power).
        split_withheld: Why there are no per-request energies, when there are none.
        request_queue_s: Seconds each request waited in the server's queue (rebuilt from the
            server's cap, first come first served).
        engine_metrics: The engine's own counters, when it exposes ``/metrics``.
        energy_scope_note: What the energy covers when it is modelled (the server's process
            tree, a given ``--server-pid``, or the whole machine).
    """

    endpoint_api: Literal["chat", "completions"]
    engine: str | None = None
    engine_version_source: str | None = None
    launched: bool = False
    concurrency: PosInt
    request_rate_per_s: float | None = Field(default=None, gt=0)
    burstiness: float | None = Field(default=None, gt=0)
    seed: int = 0
    max_output_tokens: PosInt
    ignore_eos: bool
    ignore_eos_via: str | None = None
    outputs_ended_early: NonNegInt = 0
    requests_completed: NonNegInt
    requests_failed: NonNegInt = 0
    input_tokens_total: NonNegInt
    output_tokens_total: NonNegInt
    window_start_s: NonNegFloat
    window_end_s: NonNegFloat
    window_output_tokens: NonNegInt
    achieved_concurrency: NonNegFloat
    batch_source: Literal["server", "client"] | None = None
    server_cap: PosInt | None = None
    server_cap_source: str | None = None
    level_above_server_cap: bool | None = None
    window_counter_periods: NonNegFloat | None = None
    run_duration_s: NonNegFloat
    run_energy_j: NonNegFloat | None = None
    run_energy_per_token_j: NonNegFloat | None = None
    ttft_s: Percentiles | None = None
    tpot_s: Percentiles | None = None
    itl_s: Percentiles | None = None
    e2e_latency_s: Percentiles | None = None
    request_energy_j: Percentiles | None = None
    request_energy_per_token_j: Percentiles | None = None
    request_energies_j: tuple[NonNegFloat, ...] = ()
    request_output_tokens: tuple[NonNegInt, ...] = ()
    split_energy_j: NonNegFloat | None = None
    split_span_s: NonNegFloat | None = None
    split_window_energy_j: NonNegFloat | None = None
    split_costs: dict[str, NonNegFloat] = Field(default_factory=dict)
    split_withheld: str | None = None
    request_queue_s: Percentiles | None = None
    engine_metrics: EngineMetrics | None = None
    energy_scope_note: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ServingStats:
        if self.window_end_s < self.window_start_s:
            raise ValueError("the steady-state window ends before it starts")
        if len(self.request_energies_j) != len(self.request_output_tokens):
            raise ValueError("request_energies_j and request_output_tokens differ in length")
        return self
