"""Paths of the importer fixtures and the model configs of their models (shared by the tests)."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
MLEB = FIXTURES / "mlenergy_benchmark"
RUN_ROOT = MLEB / "run" / "llm"
RUN_DENSE = next((RUN_ROOT / "lm-arena-chat" / "results" / "Qwen" / "Qwen3-8B" / "H100").iterdir())
RUN_MOE = next(
    (RUN_ROOT / "gpqa" / "results" / "Qwen" / "Qwen3-30B-A3B-Thinking-2507" / "B200").iterdir()
)
HARNESS_CONFIGS = MLEB / "configs" / "vllm"
LM_EVAL_REAL = FIXTURES / "lm_eval" / "results_0.4.13_dummy.json"
LM_EVAL_OLD = FIXTURES / "lm_eval" / "results_0.4.5_string_model_args.json"
OPTIMUM = FIXTURES / "optimum_benchmark" / "benchmark.json"
ZEUS_LOG = FIXTURES / "zeus" / "zeus_log.csv"

# The architecture keys of the models' public config.json files (Hugging Face).
MODEL_CONFIGS = {
    "Qwen__Qwen3-8B.json": {
        "model_type": "qwen3",
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "hidden_size": 4096,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 12288,
        "max_position_embeddings": 40960,
        "torch_dtype": "bfloat16",
    },
    "Qwen__Qwen3-30B-A3B-Instruct-2507.json": {
        "model_type": "qwen3_moe",
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "hidden_size": 2048,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "max_position_embeddings": 262144,
        "torch_dtype": "bfloat16",
    },
    "meta-llama__Llama-3.1-8B-Instruct.json": {
        "model_type": "llama",
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    },
}
