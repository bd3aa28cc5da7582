"""One measured point of the inference runner: prepare, warm up, then prefill and decode windows.

Preparation (:func:`mlenergy.workloads.backends.prepare_point`: the generation backend and, for
MoE models, the experts backend; compilation and CUDA-graph capture) and the warm-up
generations run first and are timed apart; then each repeat measures a prefill and a decode
window, each holding as many passes as the meter needs
(:func:`mlenergy.measure.resolve.measure_resolved`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mlenergy.measure.resolve import measure_resolved
from mlenergy.workloads.backends import prepare_point
from mlenergy.workloads.phases import PointMeasurement, RepeatWindows

if TYPE_CHECKING:
    import torch

    from mlenergy.measure import EnergyMeter
    from mlenergy.models import LoadedModel
    from mlenergy.workloads.backends import PreparedPoint


def measure_point(
    loaded: LoadedModel,
    meter: EnergyMeter,
    input_ids: torch.Tensor,
    output_tokens: int,
    repeats: int,
    warmup: int,
    on_step: Callable[[], None] | None = None,
    *,
    generation: str = "auto",
    experts_backend: str = "auto",
    prepared: PreparedPoint | None = None,
) -> PointMeasurement:
    """Prepare and warm up, then measure ``repeats`` generations of one batch.

    For MoE models the first warm-up generation (unmeasured, eager) also counts the tokens
    routed to each expert.

    Args:
        loaded: The model.
        meter: The energy meter.
        input_ids: ``(batch, input_tokens)`` prompt ids on the model's device.
        output_tokens: Tokens per sequence to generate.
        repeats: Measured repeats.
        warmup: Unmeasured generations first.
        on_step: Called after every warm-up and measured generation (progress).
        generation: ``--generation`` policy (``auto``, ``eager``, ``compiled-static-cache``).
        experts_backend: ``--experts-backend`` policy (see :mod:`mlenergy.models.experts`).
        prepared: A point prepared by an earlier call (interleaved repeats), reused as is.

    Returns:
        The window results of each repeat, the expert utilisation (``None`` for dense models
        or without warm-up), how it generated and the prepared point.
    """
    # lazy: torch, only when a point runs (plans and checks import this module)
    from mlenergy.workloads.generation import PassRunner, generate
    from mlenergy.workloads.routing import ExpertCounter

    if prepared is None:
        prepared = prepare_point(loaded, input_ids, output_tokens, generation, experts_backend)
    prepared.apply()
    generator = prepared.generator
    counter = ExpertCounter(loaded.model, loaded.info.num_experts)
    t0 = time.perf_counter()
    for i in range(warmup):
        if i == 0:
            with counter:  # hooks on the routers: the eager forward, never the compiled one
                generate(loaded.model, input_ids, output_tokens)
        else:
            generator.generate(input_ids, output_tokens)
        if on_step:
            on_step()
    warmup_s = time.perf_counter() - t0
    work = PassRunner(generator, input_ids, output_tokens - 1)
    n_pre, n_dec = work.passes_for(getattr(meter, "target_window_s", 0.0))
    results = []
    for _ in range(repeats):
        pre, n_pre, _ = measure_resolved(meter, "prefill", work.prefill, n_pre)
        dec = None
        steps: list[float] = []
        if output_tokens > 1:
            dec, n_dec, steps = measure_resolved(meter, "decode", work.decode, n_dec)
        work.state = None
        results.append(RepeatWindows(pre, dec, steps, n_pre, n_dec if dec else 0))
        if on_step:
            on_step()
    return PointMeasurement(results, counter.utilisation(), prepared.info(warmup_s), prepared)
