"""Quality of language models: held-out perplexity on a text corpus, lm-eval-harness tasks.

Modules:
    corpus: text sources (CPython's bundled ``pydoc_data`` docs, local files, ``datasets``).
    tokenizer: a byte-level BPE tokenizer trained locally with ``tokenizers`` (seconds).
    perplexity: token streams, perplexity with a standard error, :class:`QualityResult` records.
    lmeval: adapter to lm-evaluation-harness (optional extra ``lmeval``).
    evaluate: the workflow ``mlenergy quality`` calls (evaluate one model on one task) and the
        linking of a quality record to the stored energy runs of the same model.
"""
