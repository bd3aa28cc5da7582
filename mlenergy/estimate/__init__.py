"""Energy estimator: energy, time and power of LLM serving on any GPU, in well under 1 ms.

An analytical (roofline-style) model of prefill and decode (weights, routed experts actually
hit, KV cache growing over the output, sliding windows, MLA latent cache, Mamba state,
tensor/expert/data parallel communication) with a dozen global coefficients fitted on real
measurements. See ``mlenergy/estimate/README.md``.

>>> from mlenergy.estimate import estimate
>>> e = estimate("meta-llama/Llama-3.1-8B-Instruct", "H100", batch_size=64,
...              input_tokens=512, output_tokens=256)  # doctest: +SKIP
"""

from __future__ import annotations

from mlenergy.estimate.api import Estimate, energy_source, estimate, sweep
from mlenergy.estimate.catalog import GpuSpec, catalog_names, resolve_gpu
from mlenergy.estimate.coefficients import Coefficients, default_coefficients

__all__ = [
    "Coefficients",
    "Estimate",
    "GpuSpec",
    "catalog_names",
    "default_coefficients",
    "energy_source",
    "estimate",
    "estimate_frame",
    "resolve_gpu",
    "sweep",
]


def __getattr__(name: str):  # lazy: pandas-based batch path
    if name == "estimate_frame":
        from mlenergy.estimate.batch import estimate_frame

        return estimate_frame
    raise AttributeError(name)
