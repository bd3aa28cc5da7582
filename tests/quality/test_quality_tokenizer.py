import pytest

from mlenergy.errors import UserError
from mlenergy.quality.corpus import load_corpus, split_corpus
from mlenergy.quality.perplexity import encode_text
from mlenergy.quality.tokenizer import (
    SPECIAL_TOKENS,
    as_transformers_tokenizer,
    cache_dir,
    train_tokenizer,
)


@pytest.fixture(scope="module")
def text():
    return split_corpus(load_corpus("pydoc", max_chars=60_000)).train


def test_train_roundtrip_and_cache(text, tmp_path, monkeypatch):
    monkeypatch.setenv("MLENERGY_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path
    tok = train_tokenizer(text, 512)
    assert tok.get_vocab_size() <= 512
    assert tok.token_to_id(SPECIAL_TOKENS[0]) == 0
    ids = encode_text(tok, text[:5000])
    assert tok.decode(ids.tolist()) == text[:5000]
    cached = list((tmp_path / "tokenizers").glob("*.json"))
    assert len(cached) == 1
    again = train_tokenizer(text, 512)
    assert again.encode(text[:300]).ids == tok.encode(text[:300]).ids
    hf = as_transformers_tokenizer(tok)
    assert hf.pad_token == SPECIAL_TOKENS[1]
    assert hf(text[:200])["input_ids"] == tok.encode(text[:200]).ids


def test_bad_tokenizer_requests(text):
    with pytest.raises(UserError, match="too small"):
        train_tokenizer(text, 100, use_cache=False)
    with pytest.raises(UserError, match="blank"):
        train_tokenizer("   ", 512, use_cache=False)
