"""Decode on a GPU: no host synchronisation per step; repeated passes decode the same tokens."""

from __future__ import annotations

import itertools

import pytest
import torch

from mlenergy.models import load_model
from mlenergy.workloads import generation
from mlenergy.workloads.generation import decode, prefill, rewind

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def dense():
    return load_model("preset:tiny-dense")


_TICKS = itertools.count()


class _FakeEvent:
    """A CUDA event stand-in: records the order of events, 2 ms apart."""

    def __init__(self, enable_timing: bool = False) -> None:
        self.t = None

    def record(self) -> None:
        self.t = next(_TICKS)

    def elapsed_time(self, end: _FakeEvent) -> float:
        return 2.0 * (end.t - self.t)  # milliseconds, like torch.cuda.Event


def test_cuda_decode_synchronises_once_not_per_step(dense, monkeypatch):
    syncs = []
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: syncs.append(device))
    ids = torch.randint(0, 100, (2, 5))
    state = prefill(dense.model, ids)
    # the model runs on the CPU; device="cuda" selects the GPU step timer
    times = decode(dense.model, state, 6, device="cuda:0")
    assert len(times) == 6
    assert times == pytest.approx([0.002] * 6)
    assert len(syncs) == 1  # at the end of the loop only


def test_cpu_decode_is_timed_per_step_without_cuda(dense, monkeypatch):
    monkeypatch.setattr(
        torch.cuda, "synchronize", lambda device=None: pytest.fail("no CUDA on the CPU path")
    )
    state = prefill(dense.model, torch.randint(0, 100, (1, 4)))
    times = decode(dense.model, state, 3, device="cpu")
    assert len(times) == 3 and all(t > 0 for t in times)
    assert isinstance(generation.step_timer("cpu"), generation._WallTimer)


def test_rewind_lets_the_same_decode_run_again(dense):
    ids = torch.randint(0, 100, (2, 6))
    state = prefill(dense.model, ids)
    first = state.generated[0]
    decode(dense.model, state, 5)
    once = state.output_ids().clone()
    rewind(state, first)
    assert state.cache.get_seq_length() == ids.shape[1]
    decode(dense.model, state, 5)
    assert torch.equal(state.output_ids(), once)
