"""Energy estimator: energy, time and power of LLM serving on any GPU, in well under 1 ms.

An analytical (roofline-style) model of prefill and decode (weights, routed experts actually
hit, KV cache growing over the output, sliding windows, MLA latent cache, Mamba state,
tensor/expert/data parallel communication) with a dozen global coefficients fitted on real
measurements. See ``mlenergy/estimate/README.md``.

Modules, by job:

* inputs: ``configs`` (model id or path to architecture), ``catalog`` (GPUs),
  ``serving`` (the configuration), ``checks`` (bad input, naming the field),
  ``task_defaults`` (prompt lengths per task), ``engines`` (serving-engine profiles);
* physics: ``profile`` (bytes and FLOPs of a model), ``memory`` (does it fit),
  ``features`` and ``physics`` (the vectorised model), ``coefficients`` (the fitted numbers,
  shipped in ``coefficients.json``; their calibration report beside it, with the host-bound rule);
* the one path of serving and offline estimates: ``request_types`` (a request as a typed
  object: ``EstimateRequest``, its ``ParallelLayout`` and ``GpuSettings``), ``requests`` (a
  table of requests; one estimate is a table of one row) -> ``table`` (checks via
  ``checks``, resolution, features, memory fit, interval, host-bound rule) -> ``physics`` /
  ``offline``;
  ``table_rows`` (the results, a row as an ``Estimate``); ``api`` (one estimate, a sweep)
  and ``batch`` (the CSV contract) call it (``mlenergy.testing.estimate_requests`` draws
  random requests for the agreement check of the two);
* other paths: ``training`` (with ``training_memory``), ``to_record`` (estimates as run
  records);
* the fit: ``calibration``; reading the measurements, cross-validation and refitting live in
  :mod:`mlenergy.calibrate`.

>>> from mlenergy.estimate import estimate
>>> e = estimate("meta-llama/Llama-3.1-8B-Instruct", "H100", batch_size=64,
...              input_tokens=512, output_tokens=256)  # doctest: +SKIP
"""

from __future__ import annotations

from mlenergy.estimate.api import (
    Estimate,
    EstimateRequest,
    GpuSettings,
    ParallelLayout,
    energy_source,
    estimate,
    sweep,
)
from mlenergy.estimate.batch import estimate_frame
from mlenergy.estimate.coefficients import Coefficients, default_coefficients
from mlenergy.reference.gpus import GpuSpec, catalog_names, resolve_gpu

__all__ = [
    "Coefficients",
    "Estimate",
    "EstimateRequest",
    "GpuSettings",
    "GpuSpec",
    "ParallelLayout",
    "catalog_names",
    "default_coefficients",
    "energy_source",
    "estimate",
    "estimate_frame",
    "resolve_gpu",
    "sweep",
]
