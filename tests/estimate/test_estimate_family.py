"""Leave-a-family-out cross-validation: the family key and its folds."""

from __future__ import annotations

import pandas as pd
import pytest

from mlenergy.calibrate.crossval import cross_validate, family_folds, model_family
from mlenergy.errors import UserError


@pytest.mark.parametrize(
    ("group", "family"),
    [
        ("qwen3-235b-a22b", "qwen3"),
        ("qwen3-vl-8b", "qwen3"),
        ("llama-4-scout-17b-16e", "llama"),
        ("llama-3.1-70b", "llama"),
        ("gpt-oss-120b", "gpt"),
        ("DeepSeek-V3.1", "deepseek"),
    ],
)
def test_a_family_is_the_first_word_of_the_model_line(group, family):
    assert model_family(group) == family


def test_families_sharing_an_architecture_share_a_fold():
    rows = pd.DataFrame(
        {
            "model_group": ["codellama-70b-hf", "llama-3.1-70b", "llama-3.1-8b", "qwen3-8b"],
            "arch_group": ["a70", "a70", "a8", "q8"],
        }
    )
    folds = family_folds(rows).tolist()
    assert folds[0] == folds[1] == folds[2] == "codellama+llama"
    assert folds[3] == "qwen3"


def test_families_without_a_shared_architecture_stay_apart():
    rows = pd.DataFrame(
        {"model_group": ["gemma-2-9b-it", "codegemma-7b"], "arch_group": ["g9", "cg7"]}
    )
    assert family_folds(rows).tolist() == ["gemma", "codegemma"]


def test_an_unknown_hold_out_is_named():
    with pytest.raises(UserError, match="unknown hold-out 'model'"):
        cross_validate(pd.DataFrame(), group_by="model")


@pytest.mark.slow
def test_a_held_out_family_is_predicted_by_a_fit_on_the_others():
    from mlenergy.reference.measurements import load_reference

    df = load_reference(include_v2=False)
    df = df[df["model_id"].str.contains("Qwen3-8B|Llama-3.1-8B|gemma-3")]
    cv = cross_validate(df, group_by="family")
    assert cv.folds == 3
    assert set(cv.rows["family"]) == {"qwen3", "llama", "gemma"}
    assert cv.rows["ape_energy"].notna().all()
