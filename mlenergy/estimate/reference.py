"""Locate and load the public reference measurements used to calibrate and validate.

The reference data lives outside the repository (``../shared/reference`` next to the repo
root, or ``$MLENERGY_REFERENCE_DIR``) and is never copied into it. :func:`load_reference`
returns one tidy row per measured configuration in the estimator's vocabulary.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

REFERENCE_ENV = "MLENERGY_REFERENCE_DIR"


def reference_dir() -> Path | None:
    """The reference folder: ``$MLENERGY_REFERENCE_DIR``, else ``../shared/reference``.

    Returns:
        The folder, or ``None`` when it is missing (tests then skip with a reason).
    """
    env = os.environ.get(REFERENCE_ENV)
    if env:
        p = Path(env).expanduser()
        return p if p.is_dir() else None
    repo_root = Path(__file__).resolve().parents[2]
    for candidate in (
        repo_root.parent / "shared" / "reference",
        Path.cwd().parent / "shared" / "reference",
    ):
        if candidate.is_dir():
            return candidate.resolve()
    return None


def config_id_for(model_id: str, configs_dir: str | Path | None = None) -> str:
    """The model id whose config describes ``model_id`` (``-FP8`` kept; variants mapped).

    Uses the estimator's one resolution rule
    (:func:`~mlenergy.estimate.inputs.resolve_model_config`): e.g. ``...-Thinking-2507``
    maps to the ``...-Instruct-2507`` config, ``...-v2-VL-BF16`` to ``...-v2``. An id without
    a config (or no configs folder) is returned unchanged.

    Args:
        model_id: A model id as in the reference tables.
        configs_dir: Folder of ``<org>__<name>.json`` configs (default: the reference's).
    """
    from mlenergy.errors import UserError
    from mlenergy.estimate.inputs import resolve_model_config

    try:
        resolved = resolve_model_config(model_id, configs_dir)
    except UserError:
        return model_id
    if resolved.path.suffix != ".json" or "__" not in resolved.path.stem:
        return model_id  # a path, not an id resolved under the configs folder
    out = resolved.path.stem.replace("__", "/", 1)
    return out + "-FP8" if resolved.fp8 else out


def _kind(arch: str) -> str:
    a = arch.lower()
    if "moe" in a:
        return "moe"
    if "mamba" in a or "hybrid" in a:
        return "hybrid"
    return "dense"


def load_v3(path: Path, configs_dir: str | Path | None = None) -> pd.DataFrame:
    """Read ``v3_llm.csv`` into the estimator's columns.

    Args:
        path: The table.
        configs_dir: Model configs used to map ids to their config's id (see
            :func:`config_id_for`; default: the reference's).
    """
    raw = pd.read_csv(path)
    ids = {m: config_id_for(m, configs_dir) for m in raw["model_id"].unique()}
    return pd.DataFrame(
        {
            "source": "v3",
            "model_id": raw["model_id"],
            "config_id": raw["model_id"].map(ids),
            "gpu": raw["gpu_model"].map(lambda g: "H100-SXM5-80GB" if g == "H100" else g),
            "num_gpus": raw["num_gpus"].astype(int),
            "tensor_parallel": raw["tensor_parallel"].astype(int),
            "expert_parallel": raw["expert_parallel"].astype(int),
            "data_parallel": raw["data_parallel"].astype(int),
            "pipeline_parallel": 1,
            "precision": raw["weight_precision"],
            "task": raw["task"],
            "batch_size": raw["avg_batch_size"].astype(float),
            "max_num_seqs": raw["max_num_seqs"].astype(int),
            "output_tokens": raw["avg_output_len"].astype(float),
            "energy_per_token_j": raw["energy_per_token_joules"].astype(float),
            "throughput_tokens_per_s": raw["output_throughput_tokens_per_sec"].astype(float),
            "avg_power_w": raw["avg_power_watts"].astype(float),
            "itl_s": raw["median_itl_ms"].astype(float) / 1e3,
            "kind": raw["architecture"].map(_kind),
            "legacy": False,
        }
    )


def load_v2(path: Path, task: str) -> pd.DataFrame:
    """Read a v2 table (``v2_chat_h100.csv`` / ``v2_code_h100.csv``)."""
    raw = pd.read_csv(path)
    energy = raw["Energy/req (J)"] / raw["Avg Output Tokens"]
    thr = raw["Token tput (tok/s)"].astype(float)
    tp, pp = raw["TP"].astype(int), raw["PP"].astype(int)
    return pd.DataFrame(
        {
            "source": "v2",
            "model_id": raw["Model"],
            "config_id": raw["Model"],
            "gpu": "H100-SXM5-80GB",
            "num_gpus": tp * pp,
            "tensor_parallel": tp,
            "expert_parallel": 1,
            "data_parallel": 1,
            "pipeline_parallel": pp,
            "precision": "bfloat16",
            "task": task,
            "batch_size": raw["Avg BS (reqs)"].astype(float),
            "max_num_seqs": raw["Max BS (reqs)"].astype(int),
            "output_tokens": raw["Avg Output Tokens"].astype(float),
            "energy_per_token_j": energy,
            "throughput_tokens_per_s": thr,
            "avg_power_w": energy * thr,
            "itl_s": raw["Avg TPOT (s)"].astype(float),
            "kind": "dense",
            "legacy": True,
        }
    )


def load_reference(
    root: str | Path | None = None, include_v2: bool = True, text_only: bool = False
) -> pd.DataFrame:
    """Load the reference serving measurements as one tidy frame.

    Args:
        root: The reference folder (or its ``mlenergy-leaderboard`` subfolder); default
            :func:`reference_dir`.
        include_v2: Also load the 2024 v2 tables (older engine, flagged ``legacy``).
        text_only: Drop multimodal tasks (``image-chat``, ``video-chat``).

    Raises:
        UserError: The folder or its tables are missing.
    """
    from mlenergy.errors import UserError

    base = Path(root) if root is not None else reference_dir()
    if base is None:
        raise UserError(
            "reference data not found",
            f"Set ${REFERENCE_ENV} or pass --reference pointing to shared/reference",
        )
    board = base if (base / "v3_llm.csv").is_file() else base / "mlenergy-leaderboard"
    if not (board / "v3_llm.csv").is_file():
        raise UserError(f"no v3_llm.csv under '{base}'", "Point --reference at shared/reference")
    configs = next(
        (c for c in (base / "model-configs", board.parent / "model-configs") if c.is_dir()), None
    )
    frames = [load_v3(board / "v3_llm.csv", configs)]
    if include_v2:
        for name, task in (("v2_chat_h100.csv", "sharegpt-chat"), ("v2_code_h100.csv", "code")):
            if (board / name).is_file():
                frames.append(load_v2(board / name, task))
    df = pd.concat(frames, ignore_index=True)
    if text_only:
        df = df[~df["task"].isin(["image-chat", "video-chat"])].reset_index(drop=True)
    df["model_group"] = df["config_id"].map(model_group)
    return df


def model_group(model_id: str) -> str:
    """Grouping key for cross-validation: variants of one base model share a group.

    ``-FP8``, ``-Thinking``/``-Instruct`` and ``Meta-`` prefixes are folded, so that no
    architecture appears in both the fit and the test folds.
    """
    name = model_id.split("/")[-1]
    name = re.sub(r"-FP8$", "", name)
    name = re.sub(r"-(Instruct|Thinking)(-2507)?$", "", name)
    name = re.sub(r"^Meta-", "", name)
    name = re.sub(r"-VL-BF16$", "", name)
    return name.lower()


def measurements_from_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Measured GPU serving runs of a store's flat run table, in :func:`load_reference`'s columns.

    Args:
        runs: ``RunStore.runs_frame()`` (flat columns of the store contract).

    Only ``measured:`` inference runs on a catalog GPU with a request (or decode) phase that
    has throughput and power are kept; an empty frame comes back when there are none.
    """
    from mlenergy.errors import UserError
    from mlenergy.estimate.catalog import resolve_gpu

    if runs is None or runs.empty:
        return pd.DataFrame()
    rows = []
    for r in runs.to_dict("records"):
        if not str(r.get("energy_source") or "").startswith("measured:"):
            continue
        if r.get("workload_kind") != "inference" or not r.get("accelerator_model"):
            continue
        try:
            gpu = resolve_gpu(str(r["accelerator_model"])).name
        except UserError:
            continue
        phase = "request" if pd.notna(r.get("request_avg_power_w")) else "decode"
        thr, power = r.get(f"{phase}_throughput_tokens_per_s"), r.get(f"{phase}_avg_power_w")
        if not (pd.notna(thr) and pd.notna(power) and thr > 0 and power > 0):
            continue
        batch = r.get("avg_batch_size") if pd.notna(r.get("avg_batch_size")) else r["batch_size"]
        rows.append(
            {
                "source": "store",
                "model_id": r["model_id"],
                "config_id": r["model_id"],
                "gpu": gpu,
                "num_gpus": int(r.get("accelerator_count") or 1),
                "tensor_parallel": int(r.get("tensor_parallel") or 1),
                "expert_parallel": int(r.get("expert_parallel") or 1),
                "data_parallel": int(r.get("data_parallel") or 1),
                "pipeline_parallel": int(r.get("pipeline_parallel") or 1),
                "precision": r.get("dtype") or "bfloat16",
                "task": r.get("task") or "",
                "batch_size": float(batch),
                "max_num_seqs": r.get("max_num_seqs"),
                "input_tokens": float(r.get("input_tokens") or 0),
                "output_tokens": float(r["output_tokens"]),
                "energy_per_token_j": float(power) / float(thr),
                "throughput_tokens_per_s": float(thr),
                "avg_power_w": float(power),
                "itl_s": r.get("itl_p50_s"),
                "kind": "moe" if r.get("is_moe") else "dense",
                "legacy": False,
                "model_group": model_group(str(r["model_id"])),
            }
        )
    return pd.DataFrame(rows)
