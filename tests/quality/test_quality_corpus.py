import json

import pytest

from mlenergy.errors import UserError
from mlenergy.quality.corpus import MIN_CORPUS_CHARS, load_corpus, split_corpus


def test_pydoc_corpus_is_offline_english_text():
    corpus = load_corpus("pydoc")
    assert corpus.source == "pydoc_data.topics"
    assert corpus.num_chars > 100_000
    assert "the" in corpus.text
    assert len(corpus.fingerprint) == 16


def test_split_holds_out_the_tail_at_a_line_break():
    corpus = load_corpus("pydoc")
    split = split_corpus(corpus, 0.1)
    assert split.train + split.val == corpus.text
    assert split.train.endswith("\n")
    assert 0.08 < len(split.val) / corpus.num_chars < 0.12
    assert split.dataset_label("val") == "pydoc_data.topics[val]"


def test_local_files_folders_and_jsonl(tmp_path):
    text = "hello world, this is a line of text.\n" * 100
    (tmp_path / "a.txt").write_text(text)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "b.md").write_text(text)
    lines = [json.dumps({"text": text}), "", json.dumps({"other": 1})]
    (sub / "c.jsonl").write_text("\n".join(lines))
    assert load_corpus(str(tmp_path / "a.txt")).num_chars == len(text)
    folder = load_corpus(str(tmp_path))
    assert len(folder.documents) == 3
    assert load_corpus(str(tmp_path), max_chars=5000).num_chars <= 5000 + 4


@pytest.mark.parametrize("content", ["", "   \n\n  ", "short text"])
def test_corpus_without_usable_text_is_a_user_error(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_text(content)
    with pytest.raises(UserError, match="no usable text"):
        load_corpus(str(path))


def test_bad_sources_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="neither"):
        load_corpus(str(tmp_path / "missing.txt"))
    (tmp_path / "x.bin").write_bytes(b"\0")
    with pytest.raises(UserError, match=r"no \.txt"):
        load_corpus(str(tmp_path))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(UserError, match="not JSON"):
        load_corpus(str(bad))
    with pytest.raises(UserError, match="names no dataset"):
        load_corpus("hf:")


def test_split_fraction_is_checked():
    corpus = load_corpus("pydoc", max_chars=MIN_CORPUS_CHARS * 2)
    with pytest.raises(UserError, match="out of range"):
        split_corpus(corpus, 0.0)
    with pytest.raises(UserError, match="out of range"):
        split_corpus(corpus, 0.9)
