"""A pipeline profile from the estimator's training mode (no GPU needed), and its check.

Adapter over :func:`mlenergy.estimate.training.estimate_pipeline_stages`: each stage's forward
and backward of one microbatch at every SM clock of the GPU, labelled with the estimator's
energy source. :func:`clock_shape_agreement` compares the estimate of a shipped Perseus
profile's model with the measured profile, clock by clock: the energy at each clock relative to
the top clock, and the least-energy clock.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlenergy.estimate.coefficients import default_coefficients
from mlenergy.estimate.power_model import idle_power_w
from mlenergy.estimate.training import estimate_pipeline_stages
from mlenergy.optimize.profile import ClockOption, PipelineProfile
from mlenergy.optimize.reference_profiles import load_perseus_profile
from mlenergy.reference.gpus import resolve_gpu

_GPT_STYLE = {"model_type": "gpt2", "tie_word_embeddings": True}
PERSEUS_ARCHITECTURES: dict[str, dict] = {
    "gpt3-175b-a40": {
        **_GPT_STYLE,
        "hidden_size": 12288,
        "num_hidden_layers": 96,
        "num_attention_heads": 96,
        "intermediate_size": 49152,
        "vocab_size": 50257,
    },
    "bloom-176b-a40": {
        **_GPT_STYLE,
        "hidden_size": 14336,
        "num_hidden_layers": 70,
        "num_attention_heads": 112,
        "intermediate_size": 57344,
        "vocab_size": 250880,
    },
}
"""The models of the shipped Perseus profiles as Hugging Face-style configs.

GPT-3 175B from the GPT-3 paper (Brown et al. 2020, table 2.1: 96 layers, d_model 12288, 96
heads, 4 x d_model feed-forward); Bloom 176B from its model card (70 layers, hidden 14336, 112
heads, vocabulary 250,880). Both are GPT-style decoders with tied embeddings.
"""
PERSEUS_LAYOUT: dict[str, Any] = {"stages": 8, "tensor_parallel": 8, "data_parallel": 8}
"""The layout the estimate of a Perseus profile uses: 8 stages of tensor parallel 8 (as the
profiles), 8 replicas sharding the Adam states so a stage fits an A40's 48 GB."""


def estimated_pipeline_profile(
    model: str | None,
    gpu: str | None,
    stages: int = 1,
    tensor_parallel: int = 1,
    microbatch_size: int = 1,
    seq_len: int = 2048,
    layers_per_stage: list[int] | None = None,
    data_parallel: int = 1,
    configs_dir: str | Path | None = None,
) -> PipelineProfile:
    """Estimate every stage x instruction x clock of a pipeline.

    Raises:
        UserError: As the estimator (unknown model or GPU, a stage that does not fit).
    """
    rows = estimate_pipeline_stages(
        str(model),
        str(gpu),
        stages=stages,
        tensor_parallel=tensor_parallel,
        microbatch_size=microbatch_size,
        seq_len=seq_len,
        layers_per_stage=layers_per_stage,
        data_parallel=data_parallel,
        configs_dir=configs_dir,
    )
    options: dict[tuple[int, str], list[ClockOption]] = {}
    for r in rows:
        options.setdefault((r.stage, r.instruction), []).append(
            ClockOption(int(r.frequency_mhz), float(r.time_s), float(r.energy_j))
        )
    return PipelineProfile(options, energy_source=rows[0].energy_source)


def estimated_blocking_power_w(gpu: str) -> float:
    """Power of a GPU blocked on communication, when none is given: the GPU's idle power (W).

    The catalog's idle figure (or its sibling's); Perseus measured 70.38 W on an A40, above
    idle, so pass ``--p-blocking`` when you know it.
    """
    spec = resolve_gpu(gpu)
    return float(idle_power_w(spec.idle_power_w, spec.tdp_w, default_coefficients()))


@dataclass(frozen=True)
class ClockShape:
    """How an estimated instruction's energy against the clock follows the measured one.

    Attributes:
        profile: The shipped profile (``gpt3-175b-a40``, ``bloom-176b-a40``).
        stage: Pipeline stage.
        instruction: ``forward`` or ``backward``.
        clocks_mhz: The clocks both profiles have, highest first.
        measured_ratio: Measured energy at each clock over that at the top clock.
        estimated_ratio: The same from the estimator.
        measured_best_mhz: The measured least-energy clock (MHz).
        estimated_best_mhz: The estimated least-energy clock (MHz).
    """

    profile: str
    stage: int
    instruction: str
    clocks_mhz: tuple[int, ...]
    measured_ratio: tuple[float, ...]
    estimated_ratio: tuple[float, ...]
    measured_best_mhz: int
    estimated_best_mhz: int

    @property
    def worst_ratio_error(self) -> float:
        """Largest ``|estimated / measured - 1|`` of the energy ratio over the clocks."""
        est, meas = np.array(self.estimated_ratio), np.array(self.measured_ratio)
        return float(np.max(np.abs(est / meas - 1.0)))

    @property
    def worst_clock_mhz(self) -> int:
        """The clock of :attr:`worst_ratio_error` (MHz)."""
        est, meas = np.array(self.estimated_ratio), np.array(self.measured_ratio)
        return self.clocks_mhz[int(np.argmax(np.abs(est / meas - 1.0)))]

    @property
    def best_clock_error_mhz(self) -> int:
        """Distance between the estimated and measured least-energy clocks (MHz)."""
        return abs(self.estimated_best_mhz - self.measured_best_mhz)


def clock_shape_agreement(name: str) -> list[ClockShape]:
    """Compare every stage and instruction of a shipped Perseus profile with its estimate.

    The estimate is :func:`estimated_pipeline_profile` of the profile's model
    (:data:`PERSEUS_ARCHITECTURES`) on an A40 in :data:`PERSEUS_LAYOUT`, microbatch size 1 of
    2048 tokens.

    Args:
        name: ``gpt3-175b-a40`` or ``bloom-176b-a40`` (``perseus:`` prefix allowed).
    """
    key = name.removeprefix("perseus:")
    measured = load_perseus_profile(key)
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / f"{key}.json"
        config.write_text(json.dumps(PERSEUS_ARCHITECTURES[key]))
        estimated = estimated_pipeline_profile(str(config), "A40", **PERSEUS_LAYOUT)
    out: list[ClockShape] = []
    for (stage, inst), options in sorted(measured.options.items()):
        meas = {o.frequency_mhz: o.energy_j for o in options}
        est = {o.frequency_mhz: o.energy_j for o in estimated.options[(stage, inst)]}
        clocks = sorted(set(meas) & set(est), reverse=True)
        m = np.array([meas[f] for f in clocks])
        e = np.array([est[f] for f in clocks])
        out.append(
            ClockShape(
                profile=key,
                stage=stage,
                instruction=inst,
                clocks_mhz=tuple(clocks),
                measured_ratio=tuple(float(x) for x in m / m[0]),
                estimated_ratio=tuple(float(x) for x in e / e[0]),
                measured_best_mhz=clocks[int(np.argmin(m))],
                estimated_best_mhz=clocks[int(np.argmin(e))],
            )
        )
    return out
