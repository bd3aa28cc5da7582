"""A real ``transformers serve`` on 127.0.0.1 serving tiny random-weight models.

Servers are started by the product's own launcher (a process group of their own, stopped on
exit), at most one per fixture, each bounded in time.
"""

from __future__ import annotations

import os

import pytest

from mlenergy.testing.served_model import save_tiny_served_model, transformers_serve_command
from mlenergy.workloads.serving.engine import launched_server

STARTUP_S = 240.0


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Folders of a tiny dense Llama and a tiny Mixtral MoE, with tokenizer and chat template."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    root = tmp_path_factory.mktemp("served-models")
    return {
        "dense": str(save_tiny_served_model(root / "dense", "dense")),
        "moe": str(save_tiny_served_model(root / "moe", "moe")),
    }


@pytest.fixture(scope="session")
def dense_server(tiny_models, tmp_path_factory):
    """A running ``transformers serve`` of the dense model: ``(endpoint, pid, model)``."""
    log = tmp_path_factory.mktemp("server-log") / "dense.log"
    model = tiny_models["dense"]
    with launched_server(
        transformers_serve_command(), model, 8, log, startup_timeout_s=STARTUP_S
    ) as server:
        yield server.endpoint, server.pid, model
