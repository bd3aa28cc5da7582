"""The dense-versus-MoE study: for the same quality, which spends less energy?

For each seed:

1. train every model of the size's family (:mod:`mlenergy.studies.families`) from scratch on
   the training split of a text corpus with energy windows around the steps and validation
   perplexity at checkpoints (:mod:`mlenergy.workloads.training`). The models train in turns,
   one checkpoint window each (A B C D E A B C D E ...; one runs at a time, so no window holds
   another model's work), so a drift of the machine's load falls on every model alike rather
   than on whichever trained last; each training record is appended to the store as its model
   finishes;
2. benchmark inference of all of them with their repeats interleaved, one batch size at a
   time (dense, MoE, dense, MoE... :func:`mlenergy.workloads.inference.run_interleaved`), so
   the models compared at one batch size are measured side by side in every round and a drift
   of the machine's load cancels in their ratio;
3. append each model's final held-out perplexity as a :class:`QualityResult` linked to its
   runs.

Then the report is computed from the store (:mod:`mlenergy.studies.report`). Every record of
one study carries the tags ``study=dense-vs-moe``, ``study_id``, ``size``, ``variant``,
``family``, ``role`` and ``seed``. A Ctrl-C keeps every record already appended.

Bad input (unknown size, steps < 1, a corpus too small or without text, an absent device)
raises :class:`~mlenergy.errors.UserError` before the store is opened.
"""

from __future__ import annotations

import time
import uuid
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError
from mlenergy.measure import meter_for
from mlenergy.measure.provenance import collect_hardware, collect_software
from mlenergy.models import LoadedModel, ModelSource, check_device, model_info_from_config
from mlenergy.progress import ProgressBar, progress_bar
from mlenergy.quality.corpus import DEFAULT_CORPUS, load_corpus, split_corpus
from mlenergy.quality.perplexity import encode_text, perplexity_record
from mlenergy.quality.tokenizer import train_tokenizer
from mlenergy.store.preflight import check_output_folder, open_store_for_append
from mlenergy.studies.dense_vs_moe_result import StudyResult
from mlenergy.studies.families import StudySize, Variant, get_size
from mlenergy.studies.report import build_report
from mlenergy.studies.turns import train_in_turns
from mlenergy.workloads import InferenceSpec
from mlenergy.workloads.inference import run_interleaved
from mlenergy.workloads.training import TrainingSpec, train_model

if TYPE_CHECKING:
    import torch

    from mlenergy.measure import EnergyMeter

STUDY = "dense-vs-moe"
"""Value of the ``study`` tag on every record of this study."""

VAL_FRACTION = 0.1
"""Share of the corpus characters held out for validation perplexity."""


@dataclass(frozen=True)
class StudyData:
    """Tokenised corpus of a study.

    Attributes:
        corpus_name: Corpus name (``pydoc``...).
        dataset_label: Validation split label for quality records.
        train_source: Training split label for training records.
        train_ids: Training token ids (1-D long tensor).
        val_ids: Validation token ids (1-D long tensor).
        vocab_size: Size of the trained vocabulary.
    """

    corpus_name: str
    dataset_label: str
    train_source: str
    train_ids: torch.Tensor
    val_ids: torch.Tensor
    vocab_size: int


def prepare_data(size: StudySize, corpus: str = DEFAULT_CORPUS) -> StudyData:
    """Load and split the corpus, train the tokenizer on the training split, tokenise both.

    Raises:
        UserError: If the corpus has no usable text or is too small for the split.
    """
    text = load_corpus(corpus, max_chars=size.corpus_max_chars)
    split = split_corpus(text, VAL_FRACTION)
    tok = train_tokenizer(split.train, size.vocab_size)
    train_ids = encode_text(tok, split.train)
    val_ids = encode_text(tok, split.val)
    need_val = 2 * size.seq_len + 1
    if val_ids.numel() < need_val:
        raise UserError(
            f"corpus {text.name!r} is too small for the requested split: the validation "
            f"{VAL_FRACTION:.0%} holds {val_ids.numel()} tokens, need at least {need_val}",
            "give a larger text source (--corpus)",
        )
    need_train = 4 * (size.seq_len + 1)
    if train_ids.numel() < need_train:
        raise UserError(
            f"corpus {text.name!r} is too small: {train_ids.numel()} training tokens",
            "give a larger text source (--corpus)",
        )
    return StudyData(
        corpus_name=text.name,
        dataset_label=split.dataset_label("val"),
        train_source=split.dataset_label("train"),
        train_ids=train_ids,
        val_ids=val_ids,
        vocab_size=tok.get_vocab_size(),
    )


def _build_model(size: StudySize, variant: Variant, vocab: int, seed: int, device: str) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    config = size.build_config(variant, vocab)
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zero-width shared experts warn at init
        model = AutoModelForCausalLM.from_config(config)
    return model.to(device), config


def _model_id(size: StudySize, variant: Variant) -> str:
    return f"study:{STUDY}/{size.name}/{variant.name}"


class _StepCounter:
    """Turns each model's ``on_step(step)`` callbacks into advances of one study-wide bar."""

    def __init__(self, bar: ProgressBar) -> None:
        self.bar = bar

    def start(self, label: str) -> Any:
        """Name the bar after ``label``; return that model's ``on_step`` callback."""
        self.bar.describe(label)
        done = [0]

        def on_step(step: int) -> None:
            if step > done[0]:
                self.bar.advance(step - done[0])
                done[0] = step

        return on_step


def run_study(
    size: str = "tiny",
    steps: int | None = None,
    device: str = "cpu",
    seeds: int = 1,
    data_dir: str | Path = "data",
    report_dir: str | Path = "reports/dense-vs-moe",
    progress: bool = True,
    corpus: str = DEFAULT_CORPUS,
    meter: EnergyMeter | None = None,
    cpu_threads: int | None = 1,
) -> StudyResult:
    """Run the dense-versus-MoE study end to end and write its report.

    Args:
        size: ``test`` (seconds, for CI), ``tiny`` (default: minutes on 2 CPU cores) or
            ``small`` (a GPU).
        steps: Training steps per model (default: the size's).
        device: Torch device (``cpu``, ``cuda``, ``cuda:1``).
        seeds: Independent training seeds per model (intervals need at least 2).
        data_dir: Store folder.
        report_dir: Report folder (``index.html``, ``summary.md``, PNG figures).
        progress: Show a progress bar.
        corpus: Text source (``pydoc``, a path or ``hf:<dataset>``).
        meter: Energy meter to use (default: one over the devices ``device`` occupies, by the
            scope rule of :mod:`mlenergy.measure.scope`).
        cpu_threads: Torch threads for a CPU study (default 1: tiny models gain nothing from
            more, and a shared machine slows multi-threaded torch many-fold); ``None`` keeps
            torch's setting. Restored afterwards.

    Returns:
        The study's records, tables, conclusion and report paths.

    Raises:
        UserError: For bad input, before the store is touched.
    """
    import torch

    t_start = time.perf_counter()
    spec_size = get_size(size)
    _check_counts(steps, seeds)
    device = check_device(device)
    n_steps = steps if steps is not None else spec_size.steps
    data = prepare_data(spec_size, corpus)

    data_dir = Path(data_dir)
    report_dir = Path(report_dir)
    # A damaged or unwritable store fails now, not after an hour of training.
    store = open_store_for_append(data_dir)
    check_output_folder(report_dir, what="report directory", option="--report-dir")
    own_meter = meter is None
    meter = meter or meter_for(device)
    hardware = collect_hardware(meter)
    software = collect_software()
    result = _new_result(spec_size, data, data_dir, report_dir, meter.energy_source)
    study_id = result.study_id
    threads_before = torch.get_num_threads()
    if cpu_threads is not None and device.startswith("cpu"):
        torch.set_num_threads(cpu_threads)
    total = seeds * len(spec_size.variants) * n_steps
    with progress_bar(total, "dense-vs-moe", unit="step", enabled=progress) as pbar:
        try:
            bar = _StepCounter(pbar) if progress else None
            for seed in range(seeds):
                jobs = [
                    _training_job(
                        spec_size, variant, seed, n_steps, device, data, meter, store,
                        (hardware, software), study_id, result, bar,
                    )
                    for variant in spec_size.variants
                ]  # fmt: skip
                trained = train_in_turns(jobs)
                pbar.stage(_inference_stage(spec_size, seed, seeds))
                _benchmark_and_score(
                    spec_size, trained, seed, device, data, meter, store, software, result
                )
                del trained
        finally:
            torch.set_num_threads(threads_before)
            if own_meter:
                meter.close()
        pbar.stage("writing the report (tables, figures, verdicts)")
        build_report(result, store, spec_size, corpus=data.corpus_name, steps=n_steps, seeds=seeds)
    result.elapsed_s = time.perf_counter() - t_start
    return result


def _inference_stage(size: StudySize, seed: int, seeds: int) -> str:
    """What the study does once a seed's models are trained, in words."""
    batches = ", ".join(str(b) for b in size.infer_batch_sizes)
    of_seed = f" (seed {seed + 1} of {seeds})" if seeds > 1 else ""
    return (
        f"measuring inference{of_seed}: {len(size.variants)} models x batch {batches}, "
        f"{size.infer_repeats} repeats each"
    )


def _check_counts(steps: int | None, seeds: int) -> None:
    """Refuse fewer than one training step or seed (``None`` steps: the size's default)."""
    if steps is not None and (isinstance(steps, bool) or steps < 1):
        raise UserError(f"steps must be at least 1 (got {steps})", "pass --steps 1 or more")
    if isinstance(seeds, bool) or seeds < 1:
        raise UserError(f"seeds must be at least 1 (got {seeds})", "pass --seeds 1 or more")


def _new_result(
    size: StudySize, data: StudyData, data_dir: Path, report_dir: Path, energy_source: str
) -> StudyResult:
    """An empty result under a new study id (size, UTC time, random suffix)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return StudyResult(
        study_id=f"{size.name}-{stamp}-{uuid.uuid4().hex[:6]}",
        size=size.name,
        data_dir=data_dir,
        report_dir=report_dir,
        report_path=report_dir / "index.html",
        summary_path=report_dir / "summary.md",
        energy_source=energy_source,
        train_tokens=int(data.train_ids.numel()),
    )


@dataclass
class _Trained:
    """A model trained by the study, waiting for its inference benchmark and quality record."""

    variant: Variant
    tags: dict[str, str]
    info: Any
    config: Any
    outcome: Any


def _training_job(*args: Any) -> Any:
    """One model's training for :func:`~mlenergy.studies.turns.train_in_turns`.

    Takes the arguments of :func:`_train_one`.
    """
    return lambda wrap: _train_one(*args, wrap=wrap)


def _train_one(
    size: StudySize,
    variant: Variant,
    seed: int,
    steps: int,
    device: str,
    data: StudyData,
    meter: EnergyMeter,
    store: Any,
    provenance: tuple[Any, Any],
    study_id: str,
    result: StudyResult,
    bar: Any,
    *,
    wrap: Any = None,
) -> _Trained:
    """Train one model; append its training record at once.

    ``wrap(meter, on_turn)``, when given, returns the meter to train with (the turn-taking one
    of :func:`~mlenergy.studies.turns.train_in_turns`).
    """
    hardware, software = provenance
    tags = {
        "study": STUDY,
        "study_id": study_id,
        "size": size.name,
        "variant": variant.name,
        "family": variant.family,
        "role": variant.role,
        "seed": str(seed),
    }
    model, config = _build_model(size, variant, data.vocab_size, seed, device)
    info = model_info_from_config(config, _model_id(size, variant), "float32", "trained", model)
    spec = TrainingSpec(
        steps=steps,
        batch_size=size.batch_size,
        seq_len=size.seq_len,
        learning_rate=size.learning_rate,
        num_checkpoints=size.num_checkpoints,
        eval_max_tokens=size.eval_max_tokens,
        seed=seed,
        device=device,
        task=STUDY,
        prompt_source=data.train_source,
    )
    label = f"{variant.name} (seed {seed})"
    on_step = bar.start(label) if bar is not None else None
    on_turn = (lambda: bar.bar.describe(label)) if bar is not None else None
    outcome = train_model(
        model,
        data.train_ids,
        data.val_ids,
        spec,
        wrap(meter, on_turn) if wrap is not None else meter,
        model_info=info,
        hardware=hardware,
        software=software,
        tags=tags,
        on_step=on_step,
    )
    store.append([outcome.record])
    result.runs.append(outcome.record)
    if bar is not None:
        bar.bar.note(f"{variant.name} (seed {seed}) ppl {outcome.final_val.perplexity:.1f}")
    return _Trained(variant, tags, info, config, outcome)


def _benchmark_and_score(
    size: StudySize,
    trained: list[_Trained],
    seed: int,
    device: str,
    data: StudyData,
    meter: EnergyMeter,
    store: Any,
    software: Any,
    result: StudyResult,
) -> None:
    """Benchmark every trained model's inference, interleaved; append quality records."""
    per_model = _benchmark(size, trained, seed, device, meter, store)
    for t, inf_records in zip(trained, per_model, strict=True):
        result.runs.extend(inf_records)
        quality = perplexity_record(
            t.outcome.final_val,
            model=t.info,
            software=software,
            corpus=data.corpus_name,
            dataset=data.dataset_label,
            linked_run_ids=[t.outcome.record.run_id, *(r.run_id for r in inf_records)],
            tags=t.tags,
        )
        store.append([quality])
        result.quality.append(quality)


def _benchmark(
    size: StudySize,
    trained: list[_Trained],
    seed: int,
    device: str,
    meter: EnergyMeter,
    store: Any,
) -> list[list[Any]]:
    """Benchmark the trained models' inference, repeats interleaved; store the records.

    One :func:`run_interleaved` per batch size, so the models compared at a batch size are
    measured next to each other in every round.
    """
    models = []
    for t in trained:
        model = t.outcome.model
        if getattr(t.config, "output_router_logits", None):
            # Inference does not need the load-balancing loss: skip computing it per token.
            model.config.output_router_logits = False
        loaded = LoadedModel(
            model=model,
            config=t.config,
            tokenizer=None,
            info=t.info,
            model_id=t.info.model_id,
            source=ModelSource("config", ""),
            dtype="float32",
            device=device,
        )
        models.append((loaded, t.tags))
    per_model: list[list[Any]] = [[] for _ in models]
    for batch in size.infer_batch_sizes:
        records = run_interleaved(models, _inference_spec(size, batch, seed, device), meter)
        for mine, recs in zip(per_model, records, strict=True):
            mine.extend(recs)
    for recs in per_model:
        store.append(recs)
    return per_model


def _inference_spec(size: StudySize, batch: int, seed: int, device: str) -> Any:
    """The study's inference benchmark at one batch size."""
    return InferenceSpec(
        batch_sizes=(batch,),
        input_tokens=size.infer_input_tokens,
        output_tokens=size.infer_output_tokens,
        repeats=size.infer_repeats,
        warmup=size.infer_warmup,
        prompts="synthetic",
        seed=seed,
        device=device,
        idle_s=size.idle_s,
        task=STUDY,
    )
