"""Offline batch jobs: a fixed set of requests started together, the batch shrinking as they end.

An offline job (an evaluation, a data-generation run) starts ``N`` requests at once (``N`` is
the estimate's ``batch_size``): their prompts are prefilled, then the sequences decode
together and each leaves when it ends, so the batch shrinks over time. The steady-state
serving model (:mod:`~mlenergy.estimate.physics`) is evaluated on the phases of such a job:

* **prefill**: each replica's scheduler fills its steps with chunks of the prompts, up to
  its token budget per step (``max_num_batched_tokens``:
  :mod:`~mlenergy.estimate.offline_scheduler`), until every prompt is in. Each such step is
  a mixed step of the physical model carrying one chunk, so the prefill is bound by the
  prompts' FLOPs at the prefill rate. With chunked prefill the sequences whose prompts are
  done decode in the same steps (:func:`~mlenergy.estimate.offline_lengths.ride_tokens`);
  the 2024 engine's sequences wait;
* **decode**: the job's decode steps are cut into
  :data:`~mlenergy.estimate.offline_lengths.SEGMENTS` segments of equal length; each is a
  decode-only step (no prompts arriving) at the number of sequences still alive
  and their mean context (prompt plus tokens generated so far), less the tokens decoded
  during the prefill (the same steps, each with fewer sequences: the last prompts in still
  need all their steps).

Output lengths: with only the mean output length ``O`` given, every sequence generates
``O`` tokens. With a generation cap ``M`` (``max_output_tokens`` >= ``O``), sequences stop at
end-of-sequence with a constant probability per token, and those still running at ``M``
stop there: the stopping rate is the one that makes the mean ``O`` (``M = O``: all run to the
cap). Pipeline parallelism without micro-batching runs one stage at a time: steps take
``pp`` times one stage's time and each GPU idles the rest.

A job of more requests than decode together (the engine's ``max_num_seqs``, or what the KV
cache holds) runs in phases (:func:`_combine`): waves of requests started together when all
lengths are equal, else steady-state serving at the cap followed by the drain of the last
batch.
"""

from __future__ import annotations

import functools
import operator
from typing import NamedTuple

import numpy as np

from mlenergy.estimate.coefficients import Coefficients
from mlenergy.estimate.features import Features
from mlenergy.estimate.offline_lengths import decode_segments, job_stop_rate, ride_tokens
from mlenergy.estimate.physics import PREFILL_TOKEN_BUDGET, JobStep, predict
from mlenergy.estimate.prediction import Prediction

_NO_PROMPTS = 1e12
"""An output length so long that no prompt arrives during a decode segment."""
BREAKDOWN = ("energy_compute_j", "energy_memory_j", "energy_static_j", "energy_overhead_j")


MIXED_KEYS = (
    "energy_per_token_j",
    "energy_prefill_j",
    "energy_decode_j",
    "step_s",
    "t_prefill_s",
    *BREAKDOWN,
)
"""Per-token figures of a job of several phases, mixed by the phases' output tokens."""

Phase = tuple[np.ndarray, np.ndarray, np.ndarray, Prediction]
"""One phase of a job: output tokens, wall time, prefill time (s) and its per-token figures."""


def _job(job: Prediction, times: np.ndarray) -> Phase:
    """``times`` runs of a job of requests started together (:func:`_drain`)."""
    tokens = job.throughput_tokens_per_s * job.job_duration_s * times
    return tokens, job.job_duration_s * times, job.prefill_duration_s * times, job


def _served(serving: Prediction, tokens: np.ndarray) -> Phase:
    """Steady-state serving (:func:`~mlenergy.estimate.physics.predict`) of ``tokens``."""
    t = tokens / serving.throughput_tokens_per_s
    return tokens, t, serving.t_prefill_s * t / serving.step_s, serving


def _added(parts: list[np.ndarray]) -> np.ndarray:
    """The element-wise sum of the phases' arrays (broadcast as ``+`` does)."""
    return functools.reduce(operator.add, parts)


def _combine(base: Prediction, phases: list[Phase]) -> Prediction:
    """One job out of phases run one after the other (``base``: a :func:`_drain`).

    An offline job of more requests than decode together (beyond ``max_num_seqs`` or the
    KV cache) runs in phases: with equal output lengths, waves of requests started together
    (the last holding the rest); with varying lengths, steady-state serving at the cap (a
    waiting request starts whenever a sequence ends, chunked prefill included) for the
    requests beyond the last ones, which then drain as a job started together (their
    staggered starts are not modelled, so the drain keeps more sequences together than it
    would).
    """
    tokens = _added([p[0] for p in phases])
    t_total = _added([p[1] for p in phases])
    out = {
        name: _added([getattr(p[3], name) * p[0] for p in phases]) / tokens for name in MIXED_KEYS
    }
    infeasible, min_clock_power = base.power_limit_infeasible, base.min_clock_power_w
    for p_tokens, _, _, pred in (p for p in phases if p[3] is not base):
        infeasible = infeasible | (pred.power_limit_infeasible & (p_tokens > 0))
        min_clock_power = np.maximum(min_clock_power, pred.min_clock_power_w)
    return base.replace(
        **out,
        throughput_tokens_per_s=tokens / t_total,
        avg_power_w=out["energy_per_token_j"] * tokens / t_total,
        job_duration_s=t_total,
        prefill_duration_s=_added([p[2] for p in phases]),
        power_limit_infeasible=infeasible,
        min_clock_power_w=min_clock_power,
    )


Part = tuple[Features, JobStep]
"""Steps of the physical model to evaluate: their rows' features and the step they take."""


class _Drain(NamedTuple):
    """The steps of an offline job of ``batch`` requests started together, to evaluate."""

    f: Features
    pf_steps: np.ndarray  # prefill steps per replica
    ride: np.ndarray  # mean tokens a sequence decodes during them
    prefill: Part  # one prefill step per row
    segments: Part  # the decode segments (row i's are rows i k to i k + k - 1)
    seg_steps: np.ndarray  # decode steps per segment (rows x SEGMENTS)


class _Job(NamedTuple):
    """The steps of the offline jobs of :func:`predict_offline`, and what their figures need."""

    f: Features
    max_output_tokens: np.ndarray
    requests: np.ndarray | None
    drains: tuple[_Drain, ...]  # the requests started together, then the last wave's

    def parts(self) -> list[Part]:
        """Every step to evaluate (:func:`_predict_parts`), prefills first."""
        return [d.prefill for d in self.drains] + [d.segments for d in self.drains]


def _plan(
    f: Features,
    max_output_tokens: np.ndarray,
    requests: np.ndarray | None,
    budget: np.ndarray | None,
    chunked: np.ndarray | None,
) -> _Job:
    """The steps of the offline jobs of :func:`predict_offline` (same arguments)."""
    n_rows = len(f)
    budget = np.full(n_rows, PREFILL_TOKEN_BUDGET) if budget is None else budget
    chunked = np.ones(n_rows, dtype=bool) if chunked is None else chunked
    # Every phase of a job shares its output lengths, so their stopping rate is found once.
    lam = job_stop_rate(f.output_tokens, max_output_tokens)
    drains: tuple[_Drain, ...] = (_plan_drain(f, max_output_tokens, budget, chunked, lam),)
    if requests is not None:
        # The last wave of a job run in waves holds the rest (see :func:`_figures`).
        rest = _rest(np.asarray(requests, float), f.batch)[1]
        f_rest = f.replace(batch=np.maximum(rest, 1e-6))
        drains += (_plan_drain(f_rest, max_output_tokens, budget, chunked, lam),)
    return _Job(f, max_output_tokens, requests, drains)


def _rest(jobs: np.ndarray, width: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Full waves of ``width`` requests in a job of ``jobs``, and the requests left over."""
    waves = np.floor(jobs / width + 1e-9)
    return waves, jobs - waves * width


def _predict_parts(c: Coefficients, parts: list[Part]) -> list[Prediction]:
    """:func:`~mlenergy.estimate.physics.predict` of every part, as one table of their rows.

    A row's prediction is its own (rows never mix), so the parts' steps are evaluated
    together: the physics' fixed cost per call is paid once, not once per part.
    """
    if len(parts) == 1:
        return [predict(parts[0][0], c, parts[0][1])]
    sizes = [len(f) for f, _ in parts]
    chunk, prefilling = [], []
    for n, (_, j) in zip(sizes, parts, strict=True):
        chunk.append(np.ones(n) if j.prefill_chunk is None else j.prefill_chunk)
        given = np.full(n, j.prefill_chunk is not None)
        prefilling.append(given if j.prefilling is None else j.prefilling)
    job = JobStep(
        context=np.concatenate([j.context for _, j in parts]),
        prefill_chunk=np.concatenate(chunk),
        prefilling=np.concatenate(prefilling),
    )
    pred = predict(Features.concat([f for f, _ in parts]), c, job).columns()
    ends = np.cumsum(sizes)
    return [
        Prediction(**{name: v[end - n : end] for name, v in pred.items()})
        for n, end in zip(sizes, ends, strict=True)
    ]


def predict_offline(
    f: Features,
    c: Coefficients,
    max_output_tokens: np.ndarray,
    requests: np.ndarray | None = None,
    budget: np.ndarray | None = None,
    chunked: np.ndarray | None = None,
) -> Prediction:
    """:func:`~mlenergy.estimate.physics.predict` for offline jobs (see the module docstring).

    Args:
        f: Feature arrays; ``batch`` is the number of requests decoding together (the job's
            requests, or the engine's concurrency cap when the job has more), ``output_tokens``
            their mean output length.
        c: Coefficients.
        max_output_tokens: Generation cap per row (tokens; NaN: none).
        requests: Requests of the job per row (default: ``batch``). More requests than
            ``batch`` run in phases (:func:`_combine`).
        budget: Tokens one step of a replica may carry (``max_num_batched_tokens``; default
            :data:`~mlenergy.estimate.physics.PREFILL_TOKEN_BUDGET`; see
            :mod:`~mlenergy.estimate.offline_scheduler`).
        chunked: Whether prompt chunks share steps with decoding sequences (default: yes).

    Returns:
        The whole job: throughput and power are job means, ``step_s`` the mean decode step,
        ``t_prefill_s`` the prefill time spread per decode step (as in serving),
        ``job_duration_s`` and ``prefill_duration_s`` the wall time of the job and of its
        prefill (s); ``decode_step_s`` and ``median_step_s`` are NaN.
    """
    job = _plan(f, max_output_tokens, requests, budget, chunked)
    parts = job.parts()
    if requests is not None:  # the queue of a job of more requests runs as serving
        parts.append((f, _steady(f)))
    preds = _predict_parts(c, parts)
    return _figures(job, preds[: len(job.drains) * 2], preds[-1])


def _steady(f: Features) -> JobStep:
    """The steady state's serving step as a :class:`~mlenergy.estimate.physics.JobStep`."""
    return JobStep(context=f.input_tokens + 0.5 * f.output_tokens)


def _figures(job: _Job, steps: list[Prediction], serving: Prediction) -> Prediction:
    """The offline jobs' figures from their steps' predictions (in :meth:`_Job.parts` order).

    Args:
        job: The jobs' steps (:func:`_plan`).
        steps: The predictions of ``job.parts()``.
        serving: Steady-state serving of the jobs' rows (runs the queue of a job of more
            requests than ``batch``; unused without ``job.requests``).
    """
    n = len(job.drains)
    drained = [_drain(d, steps[i], steps[n + i]) for i, d in enumerate(job.drains)]
    together = drained[0]
    if job.requests is None:
        return together
    f, max_output_tokens = job.f, job.max_output_tokens
    jobs, width, out_len = np.asarray(job.requests, float), f.batch, f.output_tokens
    # Equal lengths (no cap, or the cap is the mean): the batch runs in waves of ``width``
    # requests started together, the last wave holding the rest.
    waves, rest = _rest(jobs, width)
    last = drained[1]
    in_waves = _combine(together, [_job(together, waves), _job(last, (rest > 1e-6) * 1.0)])
    # Varying lengths: a waiting request starts whenever a sequence ends.
    queued = np.maximum(jobs - width, 0.0) * out_len
    in_queue = _combine(together, [_served(serving, queued), _job(together, np.ones_like(jobs))])
    equal = np.isnan(max_output_tokens) | (max_output_tokens <= out_len)
    queue = in_queue.columns()
    return Prediction(**{k: np.where(equal, v, queue[k]) for k, v in in_waves.columns().items()})


def _plan_drain(
    f: Features,
    max_output_tokens: np.ndarray,
    budget: np.ndarray,
    chunked: np.ndarray,
    lam: np.ndarray,
) -> _Drain:
    """The steps of the offline job of ``batch`` requests started together.

    Prefill: each replica's scheduler fills its steps with prompt chunks of up to ``budget``
    tokens (``max_num_batched_tokens``) until every prompt is in; with chunked prefill the
    sequences whose prompts are done decode in the same steps
    (:func:`~mlenergy.estimate.offline_lengths.ride_tokens`), without it they wait. Each step
    is a mixed step of the physical model at that chunk.
    Decode: each segment's steps at the sequences still alive, less the tokens they decoded
    during the prefill (the same steps, fewer sequences in each). ``lam`` is the jobs'
    :func:`job_stop_rate`.
    """
    n_rows = len(f)
    jobs, i, dp, out_len = f.batch, f.input_tokens, f.dp, f.output_tokens
    per_replica = jobs * i / dp
    budget = np.asarray(budget, float)
    rows = np.zeros_like(per_replica)
    for _ in range(2):  # the decoding sequences take one token each of the step's budget
        chunk = np.maximum(np.minimum(np.maximum(budget - rows, 0.5 * budget), per_replica), 1.0)
        steps = np.maximum(per_replica / chunk, 1.0)
        ride = np.where(chunked, ride_tokens(steps, f.output_tokens, max_output_tokens, lam), 0.0)
        rows = jobs / dp * ride / steps
    step_f = f.replace(batch=np.maximum(jobs * ride / steps, 1e-6))  # decoding beside the chunk
    prefill = (step_f, JobStep(context=i + ride, prefill_chunk=chunk))
    left = np.clip(1.0 - ride / np.maximum(out_len, 1e-9), 0.0, 1.0)
    alive, seg_steps, position = decode_segments(out_len, max_output_tokens, lam=lam)
    alive = alive * left[:, None]
    k = alive.shape[1]
    seg = f.repeat(k).replace(
        batch=np.maximum(np.repeat(jobs, k) * alive.ravel(), 1e-6),
        output_tokens=np.full(n_rows * k, _NO_PROMPTS),
    )
    segments = (seg, JobStep(context=np.repeat(f.input_tokens, k) + position.ravel()))
    return _Drain(f, steps, ride, prefill, segments, seg_steps)


def _watts(pred: Prediction, name: str) -> np.ndarray:
    """A per-token energy of :func:`~mlenergy.estimate.physics.predict` as power (W, all GPUs)."""
    return getattr(pred, name) * pred.throughput_tokens_per_s


def _drain(d: _Drain, pf: Prediction, flat: Prediction) -> Prediction:
    """The offline job of ``batch`` requests started together (the module docstring).

    Args:
        d: Its steps (:func:`_plan_drain`).
        pf: The prediction of its prefill step.
        flat: The predictions of its decode segments.
    """
    f, steps = d.f, d.seg_steps
    n_rows, k = steps.shape
    pp = f.pp
    jobs, out_len = f.batch, f.output_tokens
    tokens = jobs * out_len
    # Prefill: chunks of the prompts, with the sequences already prefilled decoding beside
    # them; a pipeline without micro-batching runs one stage at a time, so a step takes pp
    # stages and each GPU idles the rest.
    t_pf = d.pf_steps * pf.step_s * pp
    idle_pf = _watts(pf, "energy_static_j")
    e_pf = (pf.avg_power_w - idle_pf) * t_pf / pp + idle_pf * t_pf
    share_pf = np.clip(pf.energy_prefill_j / pf.energy_per_token_j, 0.0, 1.0)
    dec = Prediction(**{name: v.reshape(n_rows, k) for name, v in flat.columns().items()})
    t_seg = steps * dec.step_s * pp[:, None]
    idle_seg = _watts(dec, "energy_static_j")
    e_seg = (dec.avg_power_w - idle_seg) * t_seg / pp[:, None] + idle_seg * t_seg
    t_total = t_pf + t_seg.sum(axis=1)
    e_total = e_pf + e_seg.sum(axis=1)
    # Breakdown: each phase's power by kind over its time; a stage's dynamic power only while
    # it runs (1/pp of the time), the static (idle) power of every GPU throughout.
    parts = {}
    for name in BREAKDOWN:
        share = np.ones_like(pp) if name == "energy_static_j" else 1.0 / pp
        e_phase = _watts(pf, name) * t_pf * share
        e_dec = (_watts(dec, name) * t_seg * share[:, None]).sum(axis=1)
        parts[name] = (e_phase + e_dec) / tokens
    not_modelled = np.full(n_rows, np.nan)  # a job's steps vary: no one decode or median step
    return Prediction(
        throughput_tokens_per_s=tokens / t_total,
        avg_power_w=e_total / t_total,
        energy_per_token_j=e_total / tokens,
        step_s=t_seg.sum(axis=1) / np.maximum(steps.sum(axis=1), 1e-12),
        clock_mhz=dec.clock_mhz[:, 0],
        **parts,
        energy_prefill_j=e_pf * share_pf / tokens,
        energy_decode_j=(e_pf * (1.0 - share_pf) + e_seg.sum(axis=1)) / tokens,
        t_prefill_s=t_pf / out_len,
        decode_step_s=not_modelled,
        median_step_s=not_modelled.copy(),
        power_limit_infeasible=pf.power_limit_infeasible | dec.power_limit_infeasible.any(axis=1),
        min_clock_power_w=np.maximum(pf.min_clock_power_w, dec.min_clock_power_w.max(axis=1)),
        job_duration_s=t_total,
        prefill_duration_s=t_pf,
    )


def predict_modes(
    f: Features,
    c: Coefficients,
    offline: np.ndarray,
    max_output_tokens: np.ndarray,
    requests: np.ndarray,
    budget: np.ndarray,
    chunked: np.ndarray,
) -> Prediction:
    """Serving rows through :func:`predict`, offline rows through :func:`predict_offline`.

    Args:
        f: The rows' features.
        c: Coefficients.
        offline: Which rows are offline jobs.
        max_output_tokens: Generation cap per row (NaN: none; serving rows ignore it).
        requests: Requests of each row's job (more than ``batch`` queue).
        budget: Tokens per step of each row's replicas (see :func:`predict_offline`).
        chunked: Whether each row's prompt chunks share steps with decoding.
    """
    idx = np.flatnonzero(offline)
    if not len(idx):
        return predict(f, c)
    # Every row's serving step and the offline jobs' steps are evaluated as one table; a
    # row's serving prediction is its own (rows never mix), so an offline job's queue
    # reuses it.
    job = _plan(f.rows(idx), max_output_tokens[idx], requests[idx], budget[idx], chunked[idx])
    out, *steps = _predict_parts(c, [(f, _steady(f)), *job.parts()])
    merged = {name: v.copy() for name, v in out.columns().items()}
    serving = Prediction(**{name: v[idx] for name, v in merged.items()})
    sub = _figures(job, steps, serving)
    for name, v in sub.columns().items():
        merged[name][idx] = v
    return Prediction(**merged)
