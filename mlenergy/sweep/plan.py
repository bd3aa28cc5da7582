"""The plan language: a YAML grid of runs (or estimates), validated whole before anything runs.

Example (``examples/sweep-tiny.yaml``)::

    name: tiny
    kind: bench                 # or estimate
    models: [preset:tiny-dense, preset:tiny-moe]
    batch_sizes: [1, 2]
    input_tokens: 4             # a number or a list (an axis)
    output_tokens: [2]
    repeats: 1
    precisions: [float32]       # or dtypes:
    devices: [cpu]
    resources: {gpus: 0, tensor_parallel: 1, timeout_s: 600, retries: 1}
    quality: perplexity         # optional: one quality run per model

A ``kind: serve`` plan measures a serving engine: ``batch_sizes`` are its concurrency levels,
``output_tokens`` each request's cap, and a ``serve:`` block says how to reach the server and
load it (keys of :class:`~mlenergy.sweep.spec.ServeSettings`)::

    name: serve-tiny
    kind: serve
    models: [/models/llama]
    batch_sizes: [8, 64]        # concurrency levels
    input_tokens: 128
    output_tokens: 256
    serve: {launch: "vllm serve {model} --port {port} --max-num-seqs {max_num_seqs}",
            num_requests: 1024, ignore_eos: true}

The grid is the product of ``models x batch_sizes x input_tokens x output_tokens x precisions x
devices``. Every key is checked by pydantic: an unknown key, a list where a number is expected,
an empty axis or a negative length is a :class:`~mlenergy.errors.UserError` naming the key and
its value.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from mlenergy.errors import UserError, ValidationFailed
from mlenergy.sweep.spec import RunSpec, ServeSettings

PLAN_FIX = "Fix the plan (see examples/sweep-tiny.yaml for every key)"


def _as_list(value: Any) -> Any:
    """Let an axis be written as one value (``input_tokens: 64``) or a list."""
    if value is None or isinstance(value, list | tuple):
        return value
    return [value]


PositiveInt = Annotated[StrictInt, Field(ge=1)]
IntAxis = Annotated[list[PositiveInt], BeforeValidator(_as_list), Field(min_length=1)]
StrAxis = Annotated[list[StrictStr], BeforeValidator(_as_list), Field(min_length=1)]


class Resources(BaseModel):
    """What each run of the plan reserves and how it is supervised.

    Attributes:
        gpus: GPUs per run, on one node (``None``: 1 for ``cuda`` devices of a bench, else 0).
        tensor_parallel: Tensor-parallel degree over the run's GPUs (divides ``gpus``).
        timeout_s: Seconds after which a run is cancelled and stored as timed out.
        retries: Times a crashed run is run again before it is stored as failed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: Annotated[StrictInt, Field(ge=0)] | None = None
    tensor_parallel: PositiveInt = 1
    timeout_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    retries: Annotated[StrictInt, Field(ge=0, le=10)] = 0


class Plan(BaseModel):
    """A sweep plan (see the module docstring for the keys)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[StrictStr, Field(min_length=1, max_length=100, pattern=r"^[\w.\-]+$")]
    kind: Literal["bench", "estimate", "serve"] = "bench"
    models: StrAxis
    batch_sizes: IntAxis
    input_tokens: IntAxis
    output_tokens: IntAxis
    repeats: PositiveInt = 1
    warmup: Annotated[StrictInt, Field(ge=0)] = 0
    precisions: StrAxis | None = None
    dtypes: StrAxis | None = None
    devices: StrAxis | None = None
    seed: StrictInt = 0
    prompts: StrictStr = "synthetic"
    resources: Resources = Resources()
    quality: Annotated[StrictStr, Field(pattern=r"^(perplexity|lm-eval:\S+)$")] | None = None
    serve: ServeSettings | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        if self.precisions is not None and self.dtypes is not None:
            raise ValueError("give either precisions or dtypes, not both")
        gpus, tp = self.resources.gpus, self.resources.tensor_parallel
        if tp > 1 and (gpus is None or gpus % tp):
            raise ValueError(f"tensor_parallel {tp} must divide resources.gpus ({gpus})")
        if self.kind == "estimate" and self.quality is not None:
            raise ValueError("quality runs are measured: use them with kind: bench")
        if (self.kind == "serve") != (self.serve is not None):
            raise ValueError("a serve: block goes with kind: serve, and kind: serve needs one")
        if self.serve is not None:
            if (self.serve.endpoint is None) == (self.serve.launch is None):
                raise ValueError("serve: give exactly one of endpoint and launch")
            if self.serve.num_requests < max(self.batch_sizes):
                raise ValueError("serve.num_requests is below the largest concurrency level")
            if self.quality is not None:
                raise ValueError("quality runs go with kind: bench")
        return self

    @property
    def precision_axis(self) -> list[str]:
        """The precisions (or dtypes) of the grid, with the kind's default."""
        given = self.precisions or self.dtypes
        return list(given) if given else ["bfloat16" if self.kind == "estimate" else "float32"]

    @property
    def device_axis(self) -> list[str]:
        """The devices of the grid (torch devices for bench, catalog GPUs for estimates)."""
        return (
            list(self.devices) if self.devices else ["H100" if self.kind == "estimate" else "cpu"]
        )

    def gpus_for(self, device: str) -> int:
        """GPUs each run on ``device`` reserves."""
        if self.resources.gpus is not None:
            return self.resources.gpus
        if self.kind in ("bench", "serve"):
            return 1 if device.startswith("cuda") else 0
        return self.resources.tensor_parallel

    def runs(self) -> list[RunSpec]:
        """Expand the grid into run specifications (measured or estimated points, then quality)."""
        res = self.resources
        out: list[RunSpec] = []
        axes = itertools.product(
            dict.fromkeys(self.models),
            self.precision_axis,
            self.device_axis,
            dict.fromkeys(self.batch_sizes),
            dict.fromkeys(self.input_tokens),
            dict.fromkeys(self.output_tokens),
        )
        measured = self.kind != "estimate"
        for model, precision, device, batch, n_in, n_out in axes:
            out.append(
                RunSpec(
                    kind=self.kind,
                    model=model,
                    batch_size=batch,
                    input_tokens=n_in,
                    output_tokens=n_out,
                    repeats=self.repeats,
                    warmup=self.warmup if measured else 0,
                    precision=precision,
                    device=device,
                    gpus=self.gpus_for(device),
                    tensor_parallel=res.tensor_parallel,
                    seed=self.seed if measured else 0,
                    prompts=self.prompts if measured else "synthetic",
                    timeout_s=res.timeout_s,
                    retries=res.retries,
                    plan=self.name,
                    serve=self.serve,
                )
            )
        if self.quality:
            for model, precision, device in itertools.product(
                dict.fromkeys(self.models), self.precision_axis, self.device_axis
            ):
                out.append(
                    RunSpec(
                        kind="quality",
                        model=model,
                        precision=precision,
                        device=device,
                        gpus=self.gpus_for(device),
                        seed=self.seed,
                        quality=self.quality,
                        timeout_s=res.timeout_s,
                        retries=res.retries,
                        plan=self.name,
                    )
                )
        return out


def _where(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not str(part).startswith(("function-", "list[", "constrained-")):
            text += f".{part}" if text else str(part)
    return text or "plan"


def _value_at(data: Any, loc: tuple[Any, ...]) -> Any:
    value = data
    for part in loc:
        in_dict = isinstance(value, dict) and part in value
        in_list = isinstance(value, list) and isinstance(part, int) and part < len(value)
        if in_dict or in_list:
            value = value[part]
        else:
            break
    return value


class PlanProblems(ValidationFailed):
    """Several problems in one plan, shown one per line below a headline.

    Args:
        origin: The plan's name in messages (its path).
        problems: One line per problem, each naming its key and value.
    """

    def __init__(self, origin: str, problems: list[str]) -> None:
        self.origin = origin
        super().__init__(problems)
        self.fix = PLAN_FIX

    @property
    def summary(self) -> str:
        """The headline: how many problems, and how to fix them."""
        return f"{self.origin}: {len(self.problems)} problems in the plan, listed below. {PLAN_FIX}"


def raise_problems(origin: str, errors: list[UserError]) -> None:
    """Raise nothing for no errors, the one error itself, or every error as :class:`PlanProblems`.

    Raises:
        UserError: One problem (one line).
        PlanProblems: Two or more (one line each).
    """
    if len(errors) == 1:
        raise errors[0]
    if errors:
        lines = [e.problem.removeprefix(f"{origin}: ") for e in errors]
        fixes = [f". {e.fix}" if e.fix and e.fix != PLAN_FIX else "" for e in errors]
        raise PlanProblems(origin, [line + fix for line, fix in zip(lines, fixes, strict=True)])


def _describe(err: Any, data: Any, origin: str) -> UserError:
    """One pydantic error as one line naming the key and its value."""
    loc = tuple(err.get("loc", ()))
    if loc and isinstance(loc[-1], int) and not isinstance(_value_at(data, loc[:-1]), list):
        loc = loc[:-1]  # an axis written as one value: name the key, not an index
    key = _where(loc)
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    if err.get("type") == "extra_forbidden":
        return UserError(f"{origin}: unknown key {key!r} (value {err.get('input')!r})", PLAN_FIX)
    if err.get("type") == "missing":
        return UserError(f"{origin}: missing key {key!r}", PLAN_FIX)
    if not loc:
        return UserError(f"{origin}: {msg}", PLAN_FIX)
    value = err.get("input", _value_at(data, loc))
    return UserError(f"{origin}: key {key!r} = {value!r}: {msg}", PLAN_FIX)


def describe_validation_errors(exc: ValidationError, data: Any, origin: str) -> list[UserError]:
    """Every pydantic error of a plan, one line each naming the key and its value."""
    return [_describe(err, data, origin) for err in exc.errors(include_url=False)]


def parse_plan(data: Any, origin: str = "plan") -> Plan:
    """Validate plan data (a mapping, as read from YAML).

    Raises:
        UserError: Naming the bad key and its value (:class:`PlanProblems`: every bad key, one
            line each).
    """
    if not isinstance(data, dict):
        raise UserError(
            f"{origin}: a plan must be a mapping of keys, got {type(data).__name__}", PLAN_FIX
        )
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise_problems(origin, describe_validation_errors(exc, data, origin))
        raise  # pydantic raised with no error listed: not expected


def load_plan(path: str | Path) -> Plan:
    """Read and validate a YAML plan file.

    Raises:
        UserError: The file is missing, is not YAML, or a key is bad.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"plan file {str(path)!r} does not exist", "Pass the path of a plan.yaml")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"plan file {str(path)!r} is not valid YAML ({first})", PLAN_FIX) from None
    return parse_plan(data, str(path))
