"""The study report states how its inference generated, from the records themselves."""

from __future__ import annotations

from types import SimpleNamespace

from mlenergy.records import GenerationInfo
from mlenergy.studies.generation_note import generation_note


def _run(batch: int, **fields):
    info = GenerationInfo(torch="2.9", transformers="5.2", **fields)
    return SimpleNamespace(generation=info, workload=SimpleNamespace(batch_size=batch))


def test_no_inference_record_says_nothing():
    assert generation_note([SimpleNamespace(generation=None)]) is None


def test_dense_only():
    note = generation_note([_run(1, backend="eager")])
    assert note.startswith("Generation: inference decoded with eager (torch 2.9, transformers 5.2)")
    assert "No model ran MoE layers" in note


def test_measured_backends_are_listed_by_batch_and_why():
    compiled = {"backend": "compiled-static-cache", "compile_mode": "reduce-overhead"}
    times = {"eager": 3.0, "grouped_mm": 2.0, "batched_mm": 1.0}
    runs = [
        _run(1, **compiled, experts_backend="batched_mm", experts_backend_source="measured",
             experts_step_s=times),
        _run(8, **compiled, experts_backend="batched_mm", experts_backend_source="measured",
             experts_step_s=times),
        _run(32, **compiled, experts_backend="grouped_mm", experts_backend_source="measured",
             experts_step_s={**times, "grouped_mm": 0.5}),
        _run(32, **compiled),  # a dense model
    ]  # fmt: skip
    note = generation_note(runs)
    assert "decoded with compiled-static-cache (torch 2.9, transformers 5.2)." in note
    assert "batched_mm (the fastest decode step, timed at start-up; batch 1, 8)" in note
    assert "grouped_mm (the fastest decode step, timed at start-up; batch 32)" in note
