"""Model-id resolution shared by every path, and the serving-engine memory fit rule."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mlenergy.errors import UserError
from mlenergy.estimate import estimate
from mlenergy.estimate.batch import INPUT_COLUMNS, estimate_frame
from mlenergy.estimate.configs import config_candidates, resolve_model_config
from mlenergy.estimate.memory import GPU_MEMORY_UTILIZATION, usable_bytes


@pytest.fixture
def variant_dir(tmp_path, tiny_config_dict):
    """A configs folder of one architecture under several names (no reference needed)."""
    tiny = tiny_config_dict
    for name in ("acme__Foo-7B-Instruct-2507", "acme__Bar-7B", "acme__Bar-VL-7B-Instruct"):
        (tmp_path / f"{name}.json").write_text(json.dumps(tiny))
    (tmp_path / "acme__Baz-7B-v2.json").write_text(json.dumps({**tiny, "hidden_size": 2048}))
    return tmp_path


@pytest.mark.parametrize(
    ("model", "file", "fp8"),
    [
        ("acme/Foo-7B-Instruct-2507", "acme__Foo-7B-Instruct-2507.json", False),
        ("acme/Foo-7B-Instruct-2507-FP8", "acme__Foo-7B-Instruct-2507.json", True),
        ("acme/Foo-7B-Thinking-2507", "acme__Foo-7B-Instruct-2507.json", False),
        ("acme/Foo-7B-Thinking-2507-FP8", "acme__Foo-7B-Instruct-2507.json", True),
        ("acme/Baz-7B-v2-VL-BF16", "acme__Baz-7B-v2.json", False),
        ("ACME/bar-7b", "acme__Bar-7B.json", False),
        ("acme/Bar-7B-Base", "acme__Bar-7B.json", False),  # fewest differing tokens wins
        ("acme/Bar-VL-7B-Thinking", "acme__Bar-VL-7B-Instruct.json", False),
        ("acme/Bar-7B-pt", "acme__Bar-7B.json", False),  # gemma-style pretrained tag
        ("acme/Meta-Bar-7B", "acme__Bar-7B.json", False),  # Meta-Llama-3.1 -> Llama-3.1
        ("Foo-7B-Instruct-2507", "acme__Foo-7B-Instruct-2507.json", False),  # no organisation
    ],
)
def test_variant_ids_resolve(variant_dir, model, file, fp8):
    r = resolve_model_config(model, variant_dir)
    assert r.path.name == file and r.fp8 is fp8
    exact = model.removesuffix("-FP8").replace("/", "__") + ".json"
    variant_note = f"config {file} used for" in r.note
    assert variant_note == (exact.lower() != file.lower())
    # An fp8 id of an organisation whose fp8 format is not known says so too.
    assert ("fp8 format" in r.note) == fp8


@pytest.mark.parametrize("model", ["acme/Foo-8B-Instruct-2507", "other/Foo-7B-Instruct-2507"])
def test_id_without_candidate_is_a_clear_error(variant_dir, model):
    with pytest.raises(UserError, match="no config") as info:
        resolve_model_config(model, variant_dir)
    assert model.replace("/", "__") + ".json" in info.value.message
    assert config_candidates(model, variant_dir) == []


def test_id_without_organisation_is_ambiguous_under_two(variant_dir, tiny_config_dict):
    (variant_dir / "other__Bar-7B.json").write_text(json.dumps(tiny_config_dict))
    with pytest.raises(UserError, match="no config"):
        resolve_model_config("Bar-7B", variant_dir)
    assert "no organisation" in resolve_model_config("Baz-7B-v2", variant_dir).note


def test_single_and_batch_paths_resolve_alike(variant_dir):
    kw = dict(gpu="H100", batch_size=8, input_tokens=100, output_tokens=100)
    kw["configs_dir"] = variant_dir
    single = estimate("acme/Foo-7B-Thinking-2507-FP8", **kw)
    twin = estimate("acme/Foo-7B-Instruct-2507", precision="fp8", **kw)
    assert single.energy_per_token_j == pytest.approx(twin.energy_per_token_j, rel=1e-12)
    assert "acme__Foo-7B-Instruct-2507.json" in single.warning and twin.warning == ""
    row = ("acme/Foo-7B-Thinking-2507-FP8", "H100", 1, 1, 1, 1, 1, "", "", 8, 8, 100, 100)
    got = estimate_frame(pd.DataFrame([row], columns=INPUT_COLUMNS).astype(str), variant_dir)
    assert got.loc[0, "error"] == "" and got.loc[0, "warning"] == single.warning
    assert got.loc[0, "energy_per_token_j"] == pytest.approx(single.energy_per_token_j)


def test_usable_memory_is_vllm_default_of_binary_gb():
    assert GPU_MEMORY_UTILIZATION == 0.9
    assert usable_bytes(80) == pytest.approx(0.9 * 80 * 2**30)


L8 = "meta-llama/Llama-3.1-8B-Instruct"
# One row per outcome; index -> expected error (substring), "" = estimated.
OUTCOMES = [
    # model, gpu, n, tp, ep, dp, pp, precision, task, batch, max_seqs, in, out
    (("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 1, 1, 1, 1, "", "", 64, 64, 512, 256), ""),
    (("nope/Nothing-1B", "H100", 1, 1, 1, 1, 1, "", "", 8, 8, 100, 100), "nope__Nothing-1B.json"),
    ((L8, "H999", 1, 1, 1, 1, 1, "", "", 8, 8, 1, 1), "unknown gpu"),
    (
        ("meta-llama/Llama-3.1-8B-Instruct", "H100", 3, 3, 1, 1, 1, "", "", 8, 8, 1, 1),
        "tensor_parallel (3)",
    ),
    (  # ~800 GB of bf16 weights on 8 x 80 GB: never fits, whatever the prompt length
        (
            "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
            "H100",
            8,
            8,
            8,
            1,
            1,
            "bfloat16",
            "lm-arena-chat",
            64,
            64,
            "",
            800,
        ),
        "weights do not fit",
    ),
    (  # explicit prompt length: KV cache over what is left -> error with the arithmetic
        (
            "Qwen/Qwen3-Coder-30B-A3B-Instruct",
            "H100",
            1,
            1,
            1,
            1,
            1,
            "bfloat16",
            "sourcegraph-fim",
            128,
            128,
            2000,
            250,
        ),
        "batch_size 128 does not fit",
    ),
    (  # same row, task-default prompt length: estimated, with a warning
        (
            "Qwen/Qwen3-Coder-30B-A3B-Instruct",
            "H100",
            1,
            1,
            1,
            1,
            1,
            "bfloat16",
            "sourcegraph-fim",
            128,
            128,
            "",
            250,
        ),
        "",
    ),
    (
        ("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 1, 1, 1, 1, "", "", 16, 8, 100, 100),
        "exceeds max_num_seqs",
    ),
    (
        ("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 1, 1, 1, 1, "", "", 8, 8.5, 100, 100),
        "max_num_seqs must be a whole number",
    ),
    (("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 1, 1, 1, 1, "", "", 8, "", 100, 100), ""),
    ((L8, "H100", 1, 1, 1, 1, 1, "", "", "x", 8, 1, 1), "batch_size"),
    (("Qwen/Qwen3-30B-A3B-Thinking-2507", "B200", 1, 1, 1, 1, 1, "", "gpqa", 8, 8, "", 9000), ""),
]


def test_each_outcome_keeps_its_place(configs_dir):
    df = pd.DataFrame([r for r, _ in OUTCOMES], columns=INPUT_COLUMNS).astype(str)
    df = pd.concat([df, df], ignore_index=True)  # rows repeated: each keeps its own place
    res = estimate_frame(df, configs_dir)
    assert list(res.columns[-2:]) == ["error", "warning"]
    for i, (_, needle) in enumerate(OUTCOMES * 2):
        err, warn = res.loc[i, "error"], res.loc[i, "warning"]
        if needle:
            assert needle in err, (i, err)
            assert np.isnan(res.loc[i, "energy_per_token_j"]) and warn == ""
        else:
            assert err == "" and res.loc[i, "energy_per_token_j"] > 0, (i, err)
    n = len(OUTCOMES)
    for i in (5, 5 + n):  # the arithmetic of a KV cache that does not fit
        msg = res.loc[i, "error"]
        for part in ("GB weights", "GB activations/workspace", "GB KV cache", "usable"):
            assert part in msg
        assert "gpu_memory_utilization 0.9" in msg and "at most" in msg
    assert "task-default prompt length may not fit" in res.loc[6, "warning"]
    assert "at most" in res.loc[6, "warning"]
    assert res.loc[0, "warning"] == res.loc[9, "warning"] == ""
    assert "Qwen__Qwen3-30B-A3B-Instruct-2507.json" in res.loc[11, "warning"]


def test_single_path_applies_the_same_rule(configs_dir):
    base = dict(
        model="Qwen/Qwen3-Coder-30B-A3B-Instruct",
        gpu="H100",
        batch_size=128,
        output_tokens=250,
        task="sourcegraph-fim",
        configs_dir=configs_dir,
    )
    e = estimate(**base)
    assert "task-default prompt length may not fit" in e.warning
    mem = e.memory_gb_per_gpu
    assert mem["total"] > mem["usable"] > mem["weights"] + mem["workspace"]
    with pytest.raises(UserError, match="does not fit"):
        estimate(**base, input_tokens=2000)
    with pytest.raises(UserError, match="weights do not fit"):
        estimate(
            **{**base, "model": "meta-llama/Llama-4-Maverick-17B-128E-Instruct"}, tensor_parallel=8
        )
    with pytest.raises(UserError, match="exceeds max_num_seqs"):
        estimate(**base, max_num_seqs=64)


def test_every_reference_row_estimates_in_batch(configs_dir):
    """The measured configurations ran, so none may be refused (raw ids, default prompts)."""
    from mlenergy.reference.measurements import load_reference

    ref = load_reference()
    cols = [c for c in INPUT_COLUMNS if c not in ("model", "input_tokens")]
    df = ref[cols].astype(str).assign(model=ref["model_id"], input_tokens="")[list(INPUT_COLUMNS)]
    res = estimate_frame(df, configs_dir)
    assert len(res) == 830
    assert (res["error"] == "").all(), res.loc[res["error"] != "", "error"].head().tolist()
    assert res["energy_per_token_j"].gt(0).all()
