"""The training-step runner: train a causal LM with energy windows and quality checkpoints.

Training is cut into checkpoint intervals. Each interval runs inside one meter window (long
enough for the energy counter), then the model is evaluated on held-out tokens outside any
window, so the record's curve pairs *training energy spent so far* with *validation perplexity*
(the energy-to-quality curve). Mixture-of-Experts models that accept ``output_router_logits``
train with their auxiliary load-balancing loss (weight ``config.router_aux_loss_coef``); the
loss is recorded at every checkpoint and expert utilisation (the share of routed tokens each
expert received, averaged over layers) is counted from the router logits' top-k over the last
checkpoint interval, i.e. for the trained router.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError
from mlenergy.measure.provenance import collect_hardware, collect_software
from mlenergy.quality.perplexity import PerplexityResult, perplexity
from mlenergy.records import (
    Hardware,
    ModelInfo,
    Phase,
    PhaseResult,
    RunRecord,
    Software,
    TrainingCheckpoint,
    Workload,
    utc_now,
)

if TYPE_CHECKING:
    import torch

    from mlenergy.measure import EnergyMeter


@dataclass(frozen=True)
class TrainingSpec:
    """How to train.

    Attributes:
        steps: Optimizer steps (at least 1).
        batch_size: Sequences per step.
        seq_len: Tokens per sequence (each step sees ``batch_size * seq_len`` tokens).
        learning_rate: Peak AdamW learning rate.
        min_lr_ratio: Final learning rate as a fraction of the peak (cosine decay).
        warmup_steps: Linear warm-up steps (``None``: 10% of ``steps``, at most 100).
        weight_decay: AdamW weight decay.
        grad_clip: Gradient-norm clip (``None``: no clipping).
        num_checkpoints: Evaluation points after step 0 (one meter window each).
        eval_max_tokens: Validation tokens per checkpoint (``None``: all).
        eval_batch_size: Windows per evaluation forward pass.
        seed: Seed of batch sampling.
        device: Torch device.
        task: Workload label on the record.
        prompt_source: Where the training text came from (recorded).
    """

    steps: int
    batch_size: int = 8
    seq_len: int = 128
    learning_rate: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int | None = None
    weight_decay: float = 0.1
    grad_clip: float | None = 1.0
    num_checkpoints: int = 5
    eval_max_tokens: int | None = None
    eval_batch_size: int = 16
    seed: int = 0
    device: str = "cpu"
    task: str = "training"
    prompt_source: str = "synthetic"

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise UserError(
                f"steps must be at least 1 (got {self.steps})", "pass --steps 1 or more"
            )
        if self.batch_size < 1 or self.seq_len < 2:
            raise UserError("batch_size must be >= 1 and seq_len >= 2")
        if self.num_checkpoints < 1:
            raise UserError("num_checkpoints must be at least 1")

    def checkpoint_steps(self) -> list[int]:
        """Steps after which the model is evaluated (ends of the meter windows), ascending."""
        n = min(self.num_checkpoints, self.steps)
        return sorted({round(self.steps * (i + 1) / n) for i in range(n)})

    def lr_factor(self, step: int) -> float:
        """Learning-rate multiplier at ``step`` (0-based): linear warm-up, cosine decay."""
        warm = self.warmup_steps if self.warmup_steps is not None else min(100, self.steps // 10)
        if warm > 0 and step < warm:
            return (step + 1) / warm
        span = max(1, self.steps - warm)
        progress = min(1.0, (step - warm) / span)
        cos = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cos


@dataclass
class TrainingOutcome:
    """What :func:`train_model` returns.

    Attributes:
        record: The training run (``workload.kind == "training"``, one ``train`` phase).
        model: The trained model, in eval mode.
        final_val: Validation perplexity after the last step.
    """

    record: RunRecord
    model: Any
    final_val: PerplexityResult


@dataclass
class _RouterStats:
    """Routed-token counts per expert and load-balancing losses over one interval."""

    counts: list[Any] = field(default_factory=list)  # one tensor per MoE layer
    aux_losses: list[float] = field(default_factory=list)

    def add(self, router_logits: tuple[Any, ...] | None, top_k: int) -> None:
        import torch

        if not router_logits:
            return
        for layer, logits in enumerate(router_logits):
            if logits is None:
                continue
            idx = torch.topk(logits.detach().float(), top_k, dim=-1).indices.reshape(-1)
            c = torch.bincount(idx.cpu(), minlength=logits.shape[-1]).double()
            if layer < len(self.counts):
                self.counts[layer] += c
            else:
                self.counts.append(c)

    def utilisation(self) -> tuple[float, ...] | None:
        """Fraction of routed tokens per expert, averaged over layers (sums to 1)."""
        if not self.counts:
            return None
        fracs = [c / c.sum() for c in self.counts if float(c.sum()) > 0]
        if not fracs:
            return None
        mean = sum(fracs) / len(fracs)
        return tuple(float(v) for v in mean.tolist())


def _supports_router_logits(config: Any) -> bool:
    return getattr(config, "output_router_logits", None) is not None


def _top_k(config: Any) -> int:
    for name in ("num_experts_per_tok", "moe_topk", "top_k"):
        val = getattr(config, name, None)
        if isinstance(val, int) and val > 0:
            return val
    return 1


def _check_stream(ids: torch.Tensor, seq_len: int, what: str) -> None:
    if ids.numel() < seq_len + 2:
        raise UserError(
            f"{what} text has {ids.numel()} tokens, too few for sequences of {seq_len}",
            "use a larger text source or a shorter sequence length",
        )


@dataclass(frozen=True)
class _Objective:
    """The loss a model trains on: next-token cross-entropy, plus the MoE auxiliary loss.

    Attributes:
        routed: The model returns router logits and an auxiliary load-balancing loss.
        top_k: Experts per token (to count routed tokens).
        aux_coef: Weight of the auxiliary loss (0 for dense models).
    """

    routed: bool
    top_k: int
    aux_coef: float

    @classmethod
    def of(cls, model: Any) -> _Objective:
        config = getattr(model, "config", None)
        routed = _supports_router_logits(config)
        coef = float(getattr(config, "router_aux_loss_coef", 0.0) or 0.0) if routed else 0.0
        return cls(routed, _top_k(config), coef)


@dataclass
class _Curve:
    """Training energy and time so far, and the checkpoint rows of the energy-to-quality curve.

    ``energy_j`` becomes ``None`` (unknown, never 0) as soon as one window has no energy.
    """

    duration_s: float = 0.0
    energy_j: float | None = 0.0
    by_device_j: dict[str, float] = field(default_factory=dict)
    # (step, duration so far, energy so far or None, mean train loss, val ppl, mean aux loss)
    points: list[tuple[int, float, float | None, float | None, float, float | None]] = field(
        default_factory=list
    )

    def add_window(self, window: Any) -> None:
        """Add one meter window's duration (s) and energy (J).

        A window shorter than ten energy-counter periods (``resolvable`` is ``False``) may be
        off by a whole period: like a window without energy, it leaves the energy unknown
        from there on, with a warning (use fewer checkpoints or more steps between them).
        """
        self.duration_s += window.duration_s
        if not getattr(window, "resolvable", True):
            warnings.warn(
                f"training window {window.name!r} lasted {window.duration_s:.3g} s, under ten "
                f"energy-counter periods ({window.counter_period_s:.3g} s each): the training "
                "energy is not reported from here on; use fewer checkpoints",
                RuntimeWarning,
                stacklevel=2,
            )
        if window.energy_j is None or self.energy_j is None or not window.resolvable:
            self.energy_j = None
        else:
            self.energy_j += window.energy_j
        for dev, joules in window.energy_by_device_j.items():
            self.by_device_j[dev] = self.by_device_j.get(dev, 0.0) + joules

    def checkpoints(self, tokens_per_step: int) -> tuple[TrainingCheckpoint, ...]:
        """The checkpoint records (energies left unknown when any window had none)."""
        return tuple(
            TrainingCheckpoint(
                step=s,
                tokens_seen=s * tokens_per_step,
                duration_s=d,
                energy_j=None if self.energy_j is None else e,
                train_loss=tl,
                val_perplexity=ppl,
                load_balancing_loss=aux,
            )
            for s, d, e, tl, ppl, aux in self.points
        )


def _optimizer(model: Any, spec: TrainingSpec) -> tuple[Any, Any]:
    """AdamW (no weight decay on vectors) and its warm-up-then-cosine schedule."""
    import torch

    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": spec.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=spec.learning_rate,
        betas=(0.9, 0.95),
    )
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, spec.lr_factor)


def _train_step(
    model: Any,
    batch: torch.Tensor,
    objective: _Objective,
    optimizer: tuple[Any, Any],
    grad_clip: float | None,
    stats: _RouterStats,
) -> float:
    """One optimizer step on ``batch`` (``(batch, seq_len + 1)`` ids); return the LM loss."""
    import torch
    import torch.nn.functional as F

    opt, sched = optimizer
    kwargs: dict[str, Any] = {"use_cache": False}
    if objective.routed:
        kwargs["output_router_logits"] = True
    out = model(input_ids=batch[:, :-1], **kwargs)
    logits = out.logits
    lm_loss = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), batch[:, 1:].reshape(-1)
    )
    loss = lm_loss
    aux = getattr(out, "aux_loss", None) if objective.routed else None
    if aux is not None:
        loss = loss + objective.aux_coef * aux
        stats.aux_losses.append(float(aux.detach()))
        stats.add(getattr(out, "router_logits", None), objective.top_k)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    sched.step()
    return float(lm_loss.detach())


def train_model(
    model: Any,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    spec: TrainingSpec,
    meter: EnergyMeter,
    *,
    model_info: ModelInfo,
    hardware: Hardware | None = None,
    software: Software | None = None,
    tags: dict[str, str] | None = None,
    on_step: Callable[[int], None] | None = None,
) -> TrainingOutcome:
    """Train ``model`` with AdamW on random fixed-length windows of ``train_ids``.

    Args:
        model: A ``transformers`` causal LM (fresh weights), already on ``spec.device``.
        train_ids: 1-D tensor of training token ids.
        val_ids: 1-D tensor of held-out token ids (checkpoint perplexity).
        spec: Training settings.
        meter: The energy meter; one window per checkpoint interval.
        model_info: What model this is (``weights="trained"``).
        hardware: Hardware provenance (default: ``collect_hardware(meter)``).
        software: Software provenance (default: ``collect_software()``).
        tags: Labels copied onto the record.
        on_step: Called with the number of steps done after every step (progress bars).

    Returns:
        The run record, the trained model and its final validation perplexity.

    Raises:
        UserError: If the token streams are too short for ``spec.seq_len``.
    """
    import torch

    _check_stream(train_ids, spec.seq_len, "training")
    _check_stream(val_ids, spec.seq_len, "validation")
    if hardware is None or software is None:
        hardware = hardware or collect_hardware(meter)
        software = software or collect_software()

    objective = _Objective.of(model)
    gen = torch.Generator().manual_seed(spec.seed)
    train_ids = train_ids.reshape(-1).cpu()
    optimizer = _optimizer(model, spec)

    started = utc_now()
    last_val = _validation_perplexity(model, val_ids, spec)
    curve = _Curve(points=[(0, 0.0, 0.0, None, last_val.perplexity, None)])
    step = 0
    stats = _RouterStats()
    run_tag = f"train-{id(model):x}"
    model.train()
    for k, end_step in enumerate(spec.checkpoint_steps()):
        stats = _RouterStats()
        losses: list[float] = []
        meter.begin(f"{run_tag}-{k}")
        try:
            for _ in range(step, end_step):
                batch = _random_windows(train_ids, spec, gen)
                losses.append(
                    _train_step(model, batch, objective, optimizer, spec.grad_clip, stats)
                )
                step += 1
                if on_step is not None:
                    on_step(step)
        except BaseException:
            meter.cancel(f"{run_tag}-{k}")
            raise
        curve.add_window(meter.end(f"{run_tag}-{k}"))
        last_val = _validation_perplexity(model, val_ids, spec)
        model.train()
        mean_aux = sum(stats.aux_losses) / len(stats.aux_losses) if stats.aux_losses else None
        curve.points.append(
            (step, curve.duration_s, curve.energy_j, sum(losses) / len(losses),
             last_val.perplexity, mean_aux)
        )  # fmt: skip
    model.eval()
    record = _training_record(
        spec, curve, stats, objective, model_info, (hardware, software), meter,
        (started, utc_now()), tags,
    )  # fmt: skip
    return TrainingOutcome(record=record, model=model, final_val=last_val)


def _random_windows(train_ids: torch.Tensor, spec: TrainingSpec, gen: Any) -> torch.Tensor:
    """A batch of ``spec.batch_size`` random windows of ``seq_len + 1`` tokens, on the device."""
    import torch

    max_start = train_ids.numel() - spec.seq_len - 1
    starts = torch.randint(0, max_start + 1, (spec.batch_size,), generator=gen)
    idx = starts[:, None] + torch.arange(spec.seq_len + 1)[None, :]
    return train_ids[idx].to(spec.device)


def _validation_perplexity(
    model: Any, val_ids: torch.Tensor, spec: TrainingSpec
) -> PerplexityResult:
    """Perplexity on the held-out tokens with the spec's context, batch and token cap."""
    return perplexity(
        model,
        val_ids,
        seq_len=spec.seq_len,
        batch_size=spec.eval_batch_size,
        device=spec.device,
        max_tokens=spec.eval_max_tokens,
    )


def _training_record(
    spec: TrainingSpec,
    curve: _Curve,
    stats: _RouterStats,
    objective: _Objective,
    model_info: ModelInfo,
    provenance: tuple[Hardware, Software],
    meter: EnergyMeter,
    times: tuple[Any, Any],
    tags: dict[str, str] | None,
) -> RunRecord:
    """The run record of a finished training: one ``train`` phase and its checkpoints."""
    tokens_per_step = spec.batch_size * spec.seq_len
    phase = PhaseResult.from_totals(
        Phase.TRAIN,
        curve.duration_s,
        curve.energy_j,
        spec.steps * tokens_per_step,
        energy_by_device_j=curve.by_device_j if curve.energy_j is not None else {},
    )
    record_tags = {
        "learning_rate": f"{spec.learning_rate:g}",
        "seed": str(spec.seed),
        "final_train_loss": f"{curve.points[-1][3]:.6g}",
        **({"router_aux_loss_coef": f"{objective.aux_coef:g}"} if objective.routed else {}),
        **(tags or {}),
    }
    return RunRecord(
        started_at=times[0],
        ended_at=times[1],
        model=model_info,
        workload=Workload(
            kind="training",
            task=spec.task,
            batch_size=spec.batch_size,
            input_tokens=spec.seq_len,
            output_tokens=0,
            num_requests=spec.steps * spec.batch_size,
            prompt_source=spec.prompt_source,
            device=spec.device,
            steps=spec.steps,
            seq_len=spec.seq_len,
        ),
        hardware=provenance[0],
        software=provenance[1],
        energy_source=meter.energy_source,
        scope=meter.scope,
        phases=(phase,),
        checkpoints=curve.checkpoints(tokens_per_step),
        expert_utilisation=stats.utilisation(),
        tags=record_tags,
    )
