"""Which model ids name the same model in another weight precision.

ML.ENERGY measured some models twice: the BF16 checkpoint and its FP8 (or NVFP4) copy, under
ids such as ``Qwen/Qwen3-235B-A22B-Instruct-2507`` and ``...-2507-FP8``. They are one model, so
a fit across models counts them once (:func:`precision_base`).
"""

from __future__ import annotations

import re

_PRECISION_SUFFIX = re.compile(
    r"[-_](?:fp8|nvfp4|mxfp4|fp4|int8|int4|w8a8|w4a16|awq|gptq)(?:[-_](?:dynamic|static|block))?$",
    re.I,
)


def precision_base(model_id: str) -> str:
    """The id without a trailing precision suffix (``-FP8``, ``-FP8-Dynamic``, ``-NVFP4``...).

    >>> precision_base("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
    'Qwen/Qwen3-235B-A22B-Instruct-2507'
    """
    return _PRECISION_SUFFIX.sub("", model_id)
