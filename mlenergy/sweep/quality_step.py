"""The optional quality run of a plan: one per model, precision and device.

``quality: perplexity`` evaluates the held-out split of the bundled ``pydoc`` corpus (offline)
with :data:`PERPLEXITY_SEQ_LEN`-token windows over at most :data:`PERPLEXITY_MAX_TOKENS`
tokens; a model without a tokenizer (presets, configs) gets a BPE tokenizer trained on the
corpus's training split. ``quality: lm-eval:<task>`` runs lm-evaluation-harness (extra
``lmeval``) on a hub or local checkpoint.
"""

from __future__ import annotations

from mlenergy.errors import UserError
from mlenergy.measure.provenance import collect_software
from mlenergy.models.loading import canonical_dtype
from mlenergy.quality.evaluate import QualityRequest, model_perplexity, pretrained_info
from mlenergy.quality.lmeval import evaluate_lm_eval, require_lm_eval
from mlenergy.records import QualityResult
from mlenergy.sweep.spec import RunSpec

PERPLEXITY_CORPUS = "pydoc"
PERPLEXITY_SEQ_LEN = 128
"""Context of each perplexity window, in tokens."""
PERPLEXITY_MAX_TOKENS = 4096
"""Held-out tokens evaluated at most."""


def run_quality(spec: RunSpec, tags: dict[str, str]) -> list[QualityResult]:
    """Evaluate the quality of ``spec.model`` as ``spec.quality`` asks; return the records.

    Raises:
        UserError: An unknown task, or a model the task cannot evaluate.
    """
    task = spec.quality or ""
    if task == "perplexity":
        return [_perplexity(spec, tags)]
    if task.startswith("lm-eval:"):
        return _lm_eval(spec, task.removeprefix("lm-eval:"), tags)
    raise UserError(f"unknown quality task {task!r}", "Use perplexity or lm-eval:<task>")


def _perplexity(spec: RunSpec, tags: dict[str, str]) -> QualityResult:

    request = QualityRequest(
        model=spec.model,
        corpus=PERPLEXITY_CORPUS,
        seq_len=PERPLEXITY_SEQ_LEN,
        max_tokens=PERPLEXITY_MAX_TOKENS,
        device=spec.device,
        dtype=spec.precision,
    )
    return model_perplexity(request, seed=spec.seed, tags=tags)


def _lm_eval(spec: RunSpec, task: str, tags: dict[str, str]) -> list[QualityResult]:
    require_lm_eval()
    dtype = canonical_dtype(spec.precision)
    info = pretrained_info(spec.model, dtype)
    records = evaluate_lm_eval(
        spec.model, task, model=info, software=collect_software(), device=spec.device, dtype=dtype
    )
    return [
        QualityResult.model_validate({**r.model_dump(), "tags": {**r.tags, **tags}})
        for r in records
    ]
