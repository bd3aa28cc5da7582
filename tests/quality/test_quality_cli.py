import sys

import pytest

from mlenergy.cli import main


@pytest.mark.slow
def test_quality_perplexity_of_a_preset_is_stored(tmp_path, capsys, monkeypatch):
    from mlenergy.measure import EnergyMeter
    from mlenergy.store import RunStore
    from mlenergy.workloads import InferenceSpec, run_inference_sweep

    monkeypatch.setenv("MLENERGY_CACHE_DIR", str(tmp_path / "cache"))
    spec = InferenceSpec(
        batch_sizes=(1,), input_tokens=4, output_tokens=2, repeats=1, warmup=0, idle_s=0
    )
    with EnergyMeter() as meter:
        (run,) = run_inference_sweep(
            "preset:tiny-dense", spec, meter, store=RunStore(tmp_path / "d"), progress=False
        )
    args = ["--seq-len", "32", "--max-tokens", "640", "--data-dir", str(tmp_path / "d")]
    rc = main(["quality", "--model", "preset:tiny-dense", "--task", "perplexity", *args])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "perplexity:pydoc  perplexity =" in out
    (q,) = RunStore(tmp_path / "d").quality()
    assert q.linked_run_ids == (run.run_id,)
    assert "linked to 1 energy run" in out
    assert q.model.model_id == "preset:tiny-dense"
    assert q.num_tokens == 640
    assert q.value > 100  # random weights: about the vocabulary size
    assert q.dataset == "pydoc_data.topics[val]"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--task", "bleu"], "unknown task"),
        (["--task", "lm-eval:hellaswag"], "lm-evaluation-harness is not installed"),
        (["--seq-len", "1"], "--seq-len"),
        (["--model", "preset:nope"], "unknown preset"),
    ],
)
def test_quality_bad_input_exits_2(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    base = ["quality", "--model", "preset:tiny-dense", "--data-dir", str(tmp_path / "d")]
    rc = main(base + args)
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
