"""The study at the minimal size, end to end, plus its bad-input and Ctrl-C behaviour."""

import re

import pytest
import torch

from mlenergy.cli import main
from mlenergy.measure.meter import EnergyMeter
from mlenergy.studies import dense_vs_moe
from mlenergy.studies.families import SIZES

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The study at the minimal size, once, and the meter windows it opened and closed."""
    root = tmp_path_factory.mktemp("study")
    events = []
    begin, end = EnergyMeter.begin, EnergyMeter.end

    def logged_begin(self, name, *args, **kwargs):
        events.append(("begin", name))
        return begin(self, name, *args, **kwargs)

    def logged_end(self, name, *args, **kwargs):
        events.append(("end", name))
        return end(self, name, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLENERGY_CACHE_DIR", str(root / "cache"))
        mp.setattr(EnergyMeter, "begin", logged_begin)
        mp.setattr(EnergyMeter, "end", logged_end)
        result = dense_vs_moe.run_study(
            size="test", data_dir=root / "data", report_dir=root / "report", progress=False
        )
    return result, events


@pytest.fixture(scope="module")
def study(built):
    return built[0]


def test_report_has_one_row_per_model_with_energy_quality_and_energy_per_quality(study):
    variants = [v.name for v in SIZES["test"].variants]
    assert study.report_path.is_file()
    assert study.summary_path.is_file()
    md = study.summary_path.read_text()
    first_table = md.split("\n\n| ", 1)[1].split("\n\n", 1)[0]
    lines = ["| " + first_table.splitlines()[0], *first_table.splitlines()[1:]]
    lines = [ln for ln in lines if ln.startswith("| ")]
    header = lines[0]
    assert "val perplexity" in header
    assert "train energy" in header
    assert "to reach ppl" in header  # energy per unit of quality
    assert "J/token" in header
    model_rows = [ln for ln in lines[1:] if ln.split("|")[1].strip() in variants]
    assert sorted(r.split("|")[1].strip() for r in model_rows) == sorted(variants)
    for row in model_rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert re.match(r"^[0-9.]+", cells[4]), cells  # perplexity
        assert re.match(r"^[0-9.e-]+", cells[5]), cells  # training energy
        assert re.match(r"^[0-9.e-]+", cells[6]), cells  # energy to iso-perplexity
        assert re.match(r"^[0-9.e-]+", cells[8]), cells  # inference J/token
    html = study.report_path.read_text()
    assert "modelled:cpu-tdp" in html or "measured:" in html
    assert 'id="summary"' in html
    for png in ("energy_to_quality.png", "inference_pareto.png", "expert_utilisation.png"):
        assert (study.report_dir / png).stat().st_size > 1000
    assert "Verdict" in study.conclusion
    assert "## Routing of the MoE models" in md and 'id="experts"' in html
    # how the inference generated, from the records: eager on the CPU, the MoE's experts backend
    assert "Generation: inference decoded with eager (torch " in md and "id='generation'" in html
    assert "MoE variants ran their experts with grouped_mm (the device's documented" in md


def test_report_writes_every_verdict_the_conclusion_calls(study):
    import pandas as pd

    verdicts = pd.read_csv(study.report_dir / "verdicts.csv")
    pairs = SIZES["test"].pairs()
    batches = SIZES["test"].infer_batch_sizes
    assert len(verdicts) == len(pairs) * (1 + len(batches))  # training + each batch size
    assert set(verdicts["verdict"]) <= {"less", "more", "tie"}
    assert set(verdicts["interval"]) <= {"seeds", "repeats", "band"}
    assert (verdicts["ratio"] > 0).all()
    md = study.summary_path.read_text()
    assert "## Verdicts (less / more / tie)" in md
    assert 'id="verdicts"' in study.report_path.read_text()


def test_records_in_the_store_are_linked(study):
    from mlenergy.store import RunStore

    store = RunStore(study.data_dir)
    runs = [r for r in store.runs() if r.tags.get("study_id") == study.study_id]
    quality = [q for q in store.quality() if q.tags.get("study_id") == study.study_id]
    size = SIZES["test"]
    n_models = len(size.variants)
    training = [r for r in runs if r.workload.kind == "training"]
    inference = [r for r in runs if r.workload.kind == "inference"]
    assert len(training) == n_models
    assert len(inference) == n_models * len(size.infer_batch_sizes)
    assert len(quality) == n_models
    assert all(r.tags["repeat_order"] == "interleaved" for r in inference)
    by_id = {r.run_id: r for r in runs}
    for q in quality:
        linked = [by_id[i] for i in q.linked_run_ids]
        assert {r.workload.kind for r in linked} == {"training", "inference"}
        assert all(r.model.config_fingerprint == q.model.config_fingerprint for r in linked)
        assert all(r.tags["variant"] == q.tags["variant"] for r in linked)
    for r in training:
        assert r.model.weights == "trained"
        assert len(r.checkpoints) == size.num_checkpoints + 1
        if r.model.is_moe:
            assert r.expert_utilisation is not None


def test_summary_frame_matches_the_table(study):
    s = study.summary
    assert len(s) == len(SIZES["test"].variants)
    for col in ("final_val_perplexity", "train_energy_j", "train_energy_j_to_target",
                "energy_per_token_j"):  # fmt: skip
        assert s[col].notna().all(), col
    assert set(study.comparisons["comparison"]) == {"matched-active", "matched-total"}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--size", "huge"], "unknown study size"),
        (["--steps", "0"], "steps must be at least 1"),
        (["--seeds", "0"], "seeds must be at least 1"),
        (["--device", "cuda:7"], "device"),
    ],
)
def test_bad_input_exits_2_and_leaves_no_store(tmp_path, capsys, args, message):
    if args[:1] == ["--device"] and torch.cuda.is_available():
        pytest.skip("a GPU exists here")
    data = tmp_path / "data"
    rc = main(["study", "dense-vs-moe", *args, "--data-dir", str(data),
               "--report-dir", str(tmp_path / "r"), "--no-progress"])  # fmt: skip
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not data.exists()
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "content, message", [("tiny text " * 10, "no usable text"), ("a" * 2100, "too small")]
)
def test_bad_corpus_exits_2(tmp_path, capsys, content, message):
    corpus = tmp_path / "c.txt"
    corpus.write_text(content)
    data = tmp_path / "data"
    rc = main(["study", "dense-vs-moe", "--size", "test", "--corpus", str(corpus),
               "--data-dir", str(data), "--report-dir", str(tmp_path / "r"),
               "--no-progress"])  # fmt: skip
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not data.exists()


def test_ctrl_c_keeps_completed_models(tmp_path, monkeypatch):
    from mlenergy.store import RunStore

    real = dense_vs_moe.train_model
    variants = [v.name for v in SIZES["test"].variants]
    calls = []

    def interrupt_last_at_its_last_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == len(variants):
            steps = args[3].steps

            def on_step(step):
                if step == steps:
                    raise KeyboardInterrupt

            kwargs["on_step"] = on_step
        return real(*args, **kwargs)

    monkeypatch.setattr(dense_vs_moe, "train_model", interrupt_last_at_its_last_step)
    with pytest.raises(KeyboardInterrupt):
        dense_vs_moe.run_study(size="test", data_dir=tmp_path / "d",
                               report_dir=tmp_path / "r", progress=False)  # fmt: skip
    store = RunStore(tmp_path / "d")
    # The models train in turns; the others finished their last window before the last
    # model's: their training records were kept. Inference and quality come once every model
    # of the seed is trained (their repeats interleave), so none is half-written.
    kept = {(r.tags["variant"], r.workload.kind) for r in store.runs()}
    assert kept == {(v, "training") for v in variants[:-1]}
    assert store.quality() == []
    assert not (tmp_path / "r" / "index.html").exists()


def test_models_train_in_turns_one_window_at_a_time(built):
    _, events = built
    train = [(kind, name) for kind, name in events if name.startswith("train-")]
    # No window opens while another is open: each model's window holds only its own work.
    for (k1, n1), (k2, n2) in zip(train[::2], train[1::2], strict=True):
        assert (k1, k2) == ("begin", "end") and n1 == n2
    # Round-robin: every model's first window comes before any model's second.
    models = [name.rsplit("-", 1)[0] for kind, name in train if kind == "begin"]
    n = len(SIZES["test"].variants)
    assert len(set(models[:n])) == n
    assert models[n : 2 * n] == models[:n]


def test_two_seeds_give_bootstrap_intervals(tmp_path):
    result = dense_vs_moe.run_study(
        size="test", steps=4, seeds=2, data_dir=tmp_path / "d", report_dir=tmp_path / "r",
        progress=False,
    )  # fmt: skip
    s = result.summary
    assert (s["n_seeds"] == 2).all()
    assert (s["final_val_perplexity_ci_low"] < s["final_val_perplexity_ci_high"]).all()
    comps = result.comparisons
    assert comps["train_energy_ratio_ci_low"].notna().all()
    assert "[" in result.summary_path.read_text()  # intervals printed in the table
    assert "One seed" not in result.conclusion


def test_unusable_data_dir_fails_before_training(tmp_path, capsys):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    rc = main(["study", "dense-vs-moe", "--size", "test", "--data-dir", str(not_a_dir),
               "--report-dir", str(tmp_path / "r"), "--no-progress"])  # fmt: skip
    assert rc == 2
    assert "not a folder" in capsys.readouterr().err
    assert not_a_dir.read_text() == "x"
