"""What a serving benchmark runs: the checked options of ``mlenergy bench --endpoint/--launch``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import psutil

from mlenergy.errors import UserError
from mlenergy.models import model_info_from_config, resolve_source
from mlenergy.records import ModelInfo
from mlenergy.records.provenance import Weights
from mlenergy.workloads.serving.engine import check_endpoint


def parse_levels(text: str) -> tuple[int, ...]:
    """Parse ``--concurrency 8,64,256`` into levels (order kept, duplicates dropped).

    Raises:
        UserError: An item that is not an integer >= 1, or no item.
    """
    levels = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        try:
            value = int(item)
        except ValueError:
            value = 0
        if value < 1:
            raise UserError(
                f"concurrency level {item!r} is not an integer >= 1",
                "Use e.g. --concurrency 8,64,256",
            )
        levels.append(value)
    if not levels:
        raise UserError(f"no concurrency level in {text!r}", "Use e.g. --concurrency 8,64,256")
    return tuple(dict.fromkeys(levels))


@dataclass(frozen=True)
class ServingSpec:
    """A serving benchmark: one server, one model, several concurrency levels.

    Attributes:
        model: The model name the server expects (for ``transformers serve``: the served path).
        levels: Concurrency levels; each is one measured point (one record).
        num_requests: Requests per level (at least the level).
        endpoint: OpenAI base URL of a running server (attach mode).
        launch: Command template that starts a server per level (launch mode).
        request_rate: Mean requests per second (``math.inf``: all at once).
        burstiness: Gamma shape of inter-arrival gaps (1.0: Poisson).
        prompts: ``synthetic``, a local file or ``hf:<dataset>[:split]``.
        input_tokens: Prompt length in words (synthetic), or the cut for texts.
        max_output_tokens: ``max_tokens`` of each request.
        ignore_eos: Ask the server to ignore end-of-sequence.
        api: ``chat`` or ``completions``.
        seed: Seed of prompts and arrivals.
        task: Workload label.
        engine: Engine name and version when the server does not say (``--engine``).
        server_pid: Attached server's process id (the modelled CPU scope).
        gpu_indices: GPUs to measure (``None``: all Zeus finds).
        cpu_tdp_w: CPU full-load watts for the CPU power model.
        model_config: A config.json (or folder, preset) describing the model, when ``model``
            itself cannot be resolved (a remote server's name).
        idle_s: Seconds of idle power measured before each level (0: skip).
        startup_timeout_s: Seconds a launched server may take to answer.
        request_timeout_s: Seconds a request may wait for its next chunk.
        power_period_s: Sampling period of the power samples, seconds (Zeus polls no faster
            than 0.05 s).
        client_procs: Processes the client streams from (1: one; ``None``: chosen from the
            CPU the client uses as it runs, see :mod:`~.loadgen`).
    """

    model: str
    levels: tuple[int, ...]
    num_requests: int
    endpoint: str | None = None
    launch: str | None = None
    request_rate: float = math.inf
    burstiness: float = 1.0
    prompts: str = "synthetic"
    input_tokens: int = 64
    max_output_tokens: int = 64
    ignore_eos: bool = False
    api: Literal["chat", "completions"] = "chat"
    seed: int = 0
    task: str | None = None
    engine: str | None = None
    server_pid: int | None = None
    gpu_indices: list[int] | None = None
    cpu_tdp_w: float | None = None
    model_config: str | None = None
    idle_s: float = 1.0
    startup_timeout_s: float = 600.0
    request_timeout_s: float = 600.0
    power_period_s: float = 0.05
    client_procs: int | None = 1

    def validate(self) -> ServingSpec:
        """Check every value; return ``self``.

        Raises:
            UserError: Naming the bad option.
        """
        if (self.endpoint is None) == (self.launch is None):
            raise UserError(
                "give exactly one of --endpoint (a running server) and --launch (a command)",
                'e.g. --endpoint http://127.0.0.1:8000/v1, or --launch "vllm serve {model} '
                '--port {port} --max-num-seqs {max_num_seqs}"',
            )
        if self.endpoint is not None:
            check_endpoint(self.endpoint)
        if self.launch is not None and self.server_pid is not None:
            raise UserError(
                "--server-pid is for attached servers", "Drop it: a launched server is known"
            )
        if self.server_pid is not None and not psutil.pid_exists(self.server_pid):
            raise UserError(
                f"--server-pid {self.server_pid} is not a running process",
                "Pass the process id of the serving engine, or leave it out",
            )
        if not self.model.strip():
            raise UserError("no --model given", "Pass the model name the server serves")
        if not self.levels or min(self.levels) < 1:
            raise UserError("concurrency levels must be >= 1", "Use e.g. --concurrency 8,64")
        if self.num_requests < max(self.levels):
            raise UserError(
                f"--num-requests {self.num_requests} is below the largest level "
                f"{max(self.levels)}: the server never runs at that level",
                f"Pass --num-requests {4 * max(self.levels)} or more",
            )
        for name, value in (
            ("--input-tokens", self.input_tokens),
            ("--max-output-tokens", self.max_output_tokens),
        ):
            if value < 1:
                raise UserError(f"{name} {value} must be at least 1", f"Pass e.g. {name} 128")
        if not self.request_rate > 0:
            raise UserError(f"--request-rate {self.request_rate} must be positive", "e.g. inf")
        if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
            raise UserError(f"--burstiness {self.burstiness} must be positive", "e.g. 1.0")
        if self.api not in ("chat", "completions"):
            raise UserError(f"--api {self.api!r} is not chat or completions", "Pass --api chat")
        if not 0 <= self.idle_s < 600:
            raise UserError(f"idle seconds {self.idle_s} out of range", "Pass 0 to 600")
        return self


def describe_model(spec: ServingSpec) -> ModelInfo:
    """The record's model description, from ``--model-config`` or ``--model``.

    Raises:
        UserError: Neither can be read as a model config (a remote server's model name).
    """
    source = spec.model_config or spec.model
    try:
        resolved = resolve_source(source)
    except UserError as err:
        raise UserError(
            f"cannot describe model {source!r} for the record: {err.problem}",
            "Pass --model-config with the model's config.json (or a folder, or a hub id)",
        ) from err
    # ``dtype`` (``torch_dtype`` is its deprecated alias, which warns on every read).
    dtype = str(getattr(resolved.config, "dtype", None) or "unknown").removeprefix("torch.")
    weights: Weights = "pretrained" if resolved.pretrained else "random"
    return model_info_from_config(resolved.config, spec.model, dtype, weights)
