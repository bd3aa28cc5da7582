"""One run of a sweep, fully specified, and the stable key derived from that specification."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mlenergy.records import canonical_json, sha256_hex

KEY_TAG = "sweep_key"
"""Tag of every record a sweep stores: the key of the run that made it."""
PLAN_TAG = "sweep_plan"
"""Tag naming the plan that first stored the run."""
KEY_LENGTH = 32
"""Hex digits of a run key (128 bits of SHA-256)."""

# Fields that say *what* a run is; the key hashes exactly these. How it is executed
# (timeout_s, retries) and which plan asked for it are left out, so two plans that ask for the
# same run share its key and the store holds it once.
IDENTITY_FIELDS = (
    "kind",
    "model",
    "batch_size",
    "input_tokens",
    "output_tokens",
    "repeats",
    "warmup",
    "precision",
    "device",
    "gpus",
    "tensor_parallel",
    "seed",
    "prompts",
    "quality",
)


class ServeSettings(BaseModel):
    """How a ``serve`` run reaches its server and loads it (``kind: serve`` plans).

    Attributes:
        endpoint: OpenAI base URL of a running server (attach).
        launch: Command template starting a server per run, with ``{model}``, ``{port}``,
            ``{max_num_seqs}`` (launch).
        num_requests: Requests per run (at least its level).
        request_rate: Mean requests per second; ``None``: all at once.
        burstiness: Gamma shape of the arrival gaps (1.0: Poisson).
        ignore_eos: Ask the server to ignore end-of-sequence.
        api: ``chat`` or ``completions``.
        engine: Engine name and version when the server does not say it.
        describe_with: A config.json, folder or hub id describing the model, when the served
            name cannot be resolved.
        startup_timeout_s: Seconds a launched server may take to answer.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str | None = None
    launch: str | None = None
    num_requests: int = Field(default=256, ge=1)
    request_rate: float | None = Field(default=None, gt=0)
    burstiness: float = Field(default=1.0, gt=0)
    ignore_eos: bool = False
    api: Literal["chat", "completions"] = "chat"
    engine: str | None = None
    describe_with: str | None = None
    startup_timeout_s: float = Field(default=600.0, gt=0)


class RunSpec(BaseModel):
    """Everything a single run needs; one point of a plan's grid.

    Attributes:
        kind: ``bench`` (measured), ``estimate`` (predicted), ``quality`` (one quality
            evaluation of a model) or ``serve`` (a serving engine under load at one
            concurrency level, ``batch_size``; ``output_tokens`` is each request's cap).
        model: Model source (``preset:<name>``, hub id, folder or ``config.json``).
        batch_size: Sequences per batch (0 for a quality run).
        input_tokens: Prompt tokens per sequence (0 for a quality run).
        output_tokens: Generated tokens per sequence (0 for a quality run).
        repeats: Measured repeats of the point.
        warmup: Unmeasured warm-up generations before the repeats.
        precision: Weight dtype (``float32``, ``bfloat16``...) or, for estimates, precision
            (``bfloat16``, ``fp8``...).
        device: Torch device for ``bench`` (``cpu``, ``cuda``), catalog GPU for ``estimate``.
        gpus: GPUs reserved for and measured over the run (one node).
        tensor_parallel: Tensor-parallel degree over those GPUs.
        seed: Seed of random weights and synthetic prompts.
        prompts: Prompt source of ``bench`` runs.
        quality: The quality task of a ``quality`` run (``perplexity``, ``lm-eval:<task>``).
        timeout_s: Seconds after which the run is cancelled (``None``: no limit).
        retries: How many times a crashed run is run again before it is stored as failed.
        plan: Name of the plan the run came from.
        serve: Server and load of a ``serve`` run (part of its key).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["bench", "estimate", "quality", "serve"]
    model: str
    batch_size: int = Field(default=0, ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    repeats: int = Field(default=1, ge=1)
    warmup: int = Field(default=0, ge=0)
    precision: str = "float32"
    device: str = "cpu"
    gpus: int = Field(default=0, ge=0)
    tensor_parallel: int = Field(default=1, ge=1)
    seed: int = 0
    prompts: str = "synthetic"
    quality: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    retries: int = Field(default=0, ge=0)
    plan: str = "sweep"
    serve: ServeSettings | None = None

    @property
    def key(self) -> str:
        """Stable key of the run: a hash of the fields that define it (not of how it runs)."""
        identity = {name: getattr(self, name) for name in IDENTITY_FIELDS}
        if self.serve is not None:  # only serve runs: the keys of other runs stay as they were
            settings = self.serve.model_dump(exclude={"startup_timeout_s"})
            identity["serve"] = {k: v for k, v in settings.items() if v is not None}
        return sha256_hex(canonical_json(identity))[:KEY_LENGTH]

    def label(self) -> str:
        """One line describing the run (for ``--dry-run`` and progress)."""
        if self.kind == "quality":
            return f"quality  {self.model} {self.quality} {self.precision} {self.device}"
        gpus = f" gpus={self.gpus} tp={self.tensor_parallel}" if self.gpus else ""
        return (
            f"{self.kind:<8} {self.model} batch={self.batch_size} in={self.input_tokens} "
            f"out={self.output_tokens} {self.precision} {self.device}{gpus}"
        )
