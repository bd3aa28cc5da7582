"""The options of ``mlenergy bench``, one dataclass per concern, each field documented once.

:class:`BenchTarget` holds what both kinds of bench share (the models, the prompts, where the
records go); :class:`StaticBench` a static-batch sweep, turned into the workflow's
:class:`~mlenergy.workloads.inference.InferenceSpec` and
:class:`~mlenergy.workloads.bench.BenchOptions`; :class:`ServingBench` a serving engine under
load, turned into a :class:`~mlenergy.workloads.serving.spec.ServingSpec` by
:mod:`mlenergy.commands.bench_serving`. :func:`mlenergy.commands.typed.typed_command` makes the
options from the fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.errors import UserError
from mlenergy.measure.scope import parse_gpu_indices
from mlenergy.workloads.bench import BenchOptions
from mlenergy.workloads.bench_processes import check_processes
from mlenergy.workloads.inference import InferenceSpec, parse_batch_sizes


@dataclass(frozen=True)
class BenchTarget:
    """What both kinds of bench share: the models, their prompts, the meter, the records."""

    model: list[str] = field(metadata={"cli": {"flags": ("--model", "-m")}})
    """preset:<name>, a hub id, a model folder or a config.json (repeatable)."""
    input_tokens: int = 64
    """Prompt tokens per sequence."""
    prompts: str = "synthetic"
    """synthetic, a local .txt/.json/.jsonl/.parquet/.csv file, or hf:<dataset>[:split]."""
    seed: int = 0
    """Seed of random weights and prompts."""
    task: str | None = None
    """Workload label recorded on runs."""
    idle_s: float = 0.5
    """Seconds of idle power measured once, before the first model (0: skip)."""
    cpu_tdp_w: float | None = None
    """CPU full-load watts for the CPU power model (no counter)."""
    gpu_indices: str | None = None
    """GPUs to measure, e.g. 0,1 (none: no GPU); default: the GPUs the model occupies
    (serving: those NVML lists the server's processes on; a launched server is given exactly
    --gpu-indices)."""
    json_out: bool = field(default=False, metadata={"cli": {"flags": ("--json",)}})
    """Print the records as JSON lines on stdout only."""
    no_store: bool = field(default=False, metadata={"cli": {"flags": ("--no-store",)}})
    """Do not write the records to the store."""
    data_dir: DataDirOption = None

    def store_dir(self) -> Path | None:
        """The store the records go to (``None``: ``--no-store``)."""
        return None if self.no_store else resolve_data_dir(self.data_dir)


@dataclass(frozen=True)
class StaticBench:
    """A static-batch sweep: prefill and decode of every model over batch sizes."""

    batch_sizes: str = field(default="1,4,16", metadata={"cli": {"flags": ("--batch-sizes", "-b")}})
    """Comma-separated batch sizes."""
    output_tokens: int = 64
    """Generated tokens per sequence (EOS ignored)."""
    repeats: int = 3
    """Measured repeats per batch size."""
    warmup: int = 1
    """Unmeasured warm-up runs per batch size."""
    dtype: str = "float32"
    """float32, float16 or bfloat16."""
    device: str = "cpu"
    """Torch device: cpu, cuda, cuda:1..."""
    generation: str = "auto"
    """Decode backend: auto (compiled-static-cache on CUDA, eager elsewhere), eager, or
    compiled-static-cache (static KV cache, torch.compile, CUDA graphs)."""
    experts_backend: str = "auto"
    """MoE experts backend: auto (CPU: grouped_mm; CUDA: measured), measure, eager, grouped_mm
    or batched_mm."""
    threads: int | None = None
    """Torch CPU threads (default: torch's choice)."""
    power_timeline: bool = False
    """Record a downsampled power trace on each run."""
    interleave: bool = False
    """Measure repeats of every model and batch size in turn (A B A B); stores the records
    when the last round ends."""
    processes: int = 1
    """Repeat the bench in this many fresh processes, interleaved across models; each point's
    interval then comes from the spread between them (docs/measure.md)."""

    def spec(self, target: BenchTarget) -> InferenceSpec:
        """What every model runs.

        Raises:
            UserError: Bad batch sizes.
        """
        return InferenceSpec(
            batch_sizes=parse_batch_sizes(self.batch_sizes),
            input_tokens=target.input_tokens,
            output_tokens=self.output_tokens,
            repeats=self.repeats,
            warmup=self.warmup,
            prompts=target.prompts,
            seed=target.seed,
            dtype=self.dtype,
            device=self.device,
            idle_s=target.idle_s,
            task=target.task,
            generation=self.generation,
            experts_backend=self.experts_backend,
        )

    def options(self, target: BenchTarget) -> BenchOptions:
        """How it is measured.

        Raises:
            UserError: Bad GPU indices.
        """
        return BenchOptions(
            cpu_tdp_w=target.cpu_tdp_w,
            threads=self.threads,
            power_timeline=self.power_timeline,
            gpu_indices=parse_gpu_indices(target.gpu_indices),
            interleave=self.interleave,
        )


@dataclass(frozen=True)
class ServingBench:
    """A serving engine under load: one record per concurrency level, steady-state energy."""

    endpoint: str | None = None
    """Serving: the OpenAI base URL of a running server (e.g. http://127.0.0.1:8000/v1);
    measures it under load, steady-state window."""
    launch: str | None = None
    """Serving: a command that starts the server, once per level, with {model}, {port} and
    {max_num_seqs} filled in (e.g. "vllm serve {model} --port {port} --max-num-seqs
    {max_num_seqs}")."""
    concurrency: str = "8,64,256"
    """Serving: comma-separated concurrency levels (one record each)."""
    num_requests: int = 1024
    """Serving: requests per level (at least the level)."""
    request_rate: str = "inf"
    """Serving: 'inf' (all at once, capped by the level) or requests/s."""
    burstiness: float = 1.0
    """Serving: gamma shape of arrival gaps (1.0: Poisson)."""
    max_output_tokens: int | None = None
    """Serving: max_tokens per request (default: --output-tokens)."""
    ignore_eos: bool = field(default=False, metadata={"cli": {"flags": ("--ignore-eos",)}})
    """Serving: ask the server to ignore EOS."""
    api: str = "chat"
    """Serving: 'chat' or 'completions'."""
    engine: str | None = None
    """Serving: engine name and version when the server does not say it."""
    server_pid: int | None = None
    """Serving, attached: the server's process id, whose tree holds its GPUs (and its CPU,
    modelled, without counters); default: the process on the endpoint's port."""
    model_config: str | None = None
    """Serving: a config.json, folder or hub id that describes --model."""
    startup_timeout: float = 600.0
    """Serving: seconds a launched server may take to start."""
    request_timeout: float = 600.0
    """Serving: seconds to a request's first token, and at most between its tokens."""
    runs: int = 1
    """Serving: measure each level this many times, each with a fresh launch (or attach),
    interleaved across levels; the interval comes from their spread."""
    client_procs: str = "auto"
    """Serving: processes the client streams from; 'auto' adds them when one core would limit
    it."""

    @property
    def asked(self) -> bool:
        """Whether a serving bench was asked for (``--endpoint`` or ``--launch``)."""
        return self.endpoint is not None or self.launch is not None


def check_repeat_options(serving: ServingBench, static: StaticBench) -> None:
    """``--processes`` repeats static benches, ``--runs`` serving levels; refuse a mix-up.

    Raises:
        UserError: A repeat option of the other kind of bench, or a bad process count.
    """
    if serving.asked and static.processes != 1:
        raise UserError(
            "--processes repeats a static bench; a serving bench repeats its levels with --runs",
            f"Pass --runs {static.processes} instead",
        )
    if not serving.asked and serving.runs != 1:
        raise UserError(
            "--runs repeats serving levels (--endpoint or --launch); a static bench repeats in "
            "fresh processes with --processes",
            f"Pass --processes {serving.runs} instead",
        )
    if static.processes != 1:
        check_processes(static.processes)
