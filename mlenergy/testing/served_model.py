"""Tiny servable models for the serving tests and benchmarks.

The builder is product code, :mod:`mlenergy.workloads.serving.tiny_model` (behind
``mlenergy models save-tiny``); these names stay importable from here for test support.
"""

from __future__ import annotations

from mlenergy.workloads.serving.tiny_model import (
    save_tiny_served_model,
    transformers_serve_command,
)

__all__ = ["save_tiny_served_model", "transformers_serve_command"]
