"""Prompt sources: synthetic ids, local files through datasets, fixed lengths, tokenisation."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from mlenergy.errors import UserError
from mlenergy.workloads.prompts import PromptSet, PromptSource

TEXTS = [
    "The energy of a model is the power it draws times the time it runs.",
    "Mixture-of-Experts models route each token to a few experts.",
    "Short.",
]


def test_synthetic_ids_are_seeded_in_range_and_shaped():
    ps = PromptSet.prepare("synthetic", vocab_size=100, seed=1)
    a = ps.batch(4, 32)
    assert a.shape == (4, 32) and a.dtype == torch.long
    assert int(a.min()) >= 0 and int(a.max()) < 100
    assert torch.equal(a, PromptSet.prepare("synthetic", 100, seed=1).batch(4, 32))
    assert not torch.equal(a, PromptSet.prepare("synthetic", 100, seed=2).batch(4, 32))
    assert ps.tokenizer_kind == "random-ids"
    assert ps.source.label == "synthetic"


def _write(tmp_path, suffix):
    path = tmp_path / f"prompts{suffix}"
    if suffix == ".txt":
        path.write_text("\n".join(TEXTS) + "\n")
    elif suffix == ".jsonl":
        path.write_text("\n".join(json.dumps({"id": i, "text": t}) for i, t in enumerate(TEXTS)))
    elif suffix == ".json":
        path.write_text(json.dumps([{"prompt": t} for t in TEXTS]))
    elif suffix == ".parquet":
        pq.write_table(pa.table({"n": [1, 2, 3], "content": TEXTS}), path)
    return path


@pytest.mark.parametrize("suffix", [".txt", ".jsonl", ".json", ".parquet"])
def test_local_files_load_and_tile_to_fixed_length(tmp_path, suffix):
    path = _write(tmp_path, suffix)
    ps = PromptSet.prepare(str(path), vocab_size=512, seed=0)
    assert ps.tokenizer_kind == "trained-bpe"
    assert ps.source.label == str(path)
    assert len(ps.sequences) == len(TEXTS)
    batch = ps.batch(5, 40)  # more rows than texts: cycles; "Short." is tiled
    assert batch.shape == (5, 40)
    assert int(batch.max()) < 512
    assert torch.equal(batch[0], batch[3])
    short = ps.sequences[2]
    assert batch[2, : len(short)].tolist() == short
    assert batch[2, len(short) : 2 * len(short)].tolist() == short[: 40 - len(short)]


def test_truncates_long_prompts(tmp_path):
    ps = PromptSet.prepare(str(_write(tmp_path, ".txt")), vocab_size=512)
    batch = ps.batch(1, 3)
    assert batch[0].tolist() == ps.sequences[0][:3]


def test_small_vocab_falls_back_to_bytes(tmp_path):
    ps = PromptSet.prepare(str(_write(tmp_path, ".txt")), vocab_size=200)
    assert ps.tokenizer_kind == "bytes"
    assert int(ps.batch(3, 16).max()) < 200
    assert ps.sequences[2] == list(b"Short.")


class _FakeTokenizer:
    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [[len(w) for w in t.split()] for t in texts]}


def test_model_tokenizer_is_used_when_given(tmp_path):
    ps = PromptSet.prepare(str(_write(tmp_path, ".txt")), 1000, tokenizer=_FakeTokenizer())
    assert ps.tokenizer_kind == "model"
    assert ps.sequences[2] == [6]


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ("", "empty prompt source"),
        ("missing.jsonl", "does not exist"),
        ("hf:", "names no dataset"),
    ],
)
def test_bad_sources(source, match):
    with pytest.raises(UserError, match=match):
        PromptSource.parse(source)


def test_unsupported_suffix_and_no_text_column(tmp_path):
    odd = tmp_path / "p.xml"
    odd.write_text("<a/>")
    with pytest.raises(UserError, match="unsupported format"):
        PromptSource.parse(str(odd))
    numbers = tmp_path / "n.jsonl"
    numbers.write_text('{"a": 1}\n{"a": 2}\n')
    with pytest.raises(UserError, match="no text column"):
        PromptSet.prepare(str(numbers), 512)
    empty = tmp_path / "e.jsonl"
    empty.write_text('{"text": "  "}\n')
    with pytest.raises(UserError, match="no non-empty text"):
        PromptSet.prepare(str(empty), 512)


def test_hub_dataset_offline_is_a_user_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    src = PromptSource.parse("hf:no-such-org/no-such-dataset:test")
    assert (src.value, src.split) == ("no-such-org/no-such-dataset", "test")
    with pytest.raises(UserError, match="could not load dataset 'no-such-org/no-such-dataset'"):
        PromptSet.prepare(src, 512)
