"""The power sampler thread: a run shorter than one period still gets a sample of its own."""

import time

from mlenergy.measure.timeline import ThreadSampler


def test_sample_now_covers_a_run_shorter_than_the_period():
    sampler = ThreadSampler(lambda now: 42.0, period_s=60.0)
    try:
        start = time.time()
        assert sampler.samples() == []  # no period has passed
        sampler.sample_now()
        (sample,) = sampler.samples()
        assert sample[0] >= start and sample[1] == 42.0
    finally:
        sampler.stop()
