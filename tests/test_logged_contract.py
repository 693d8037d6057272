"""The router contract for the ``logged`` registry router (trained on a simulated log that
reveals one LLM per training query; tested on the full matrix): wrapping mf (ips), the graph
router (dr), ALS (ips) and BPR (dr)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.feedback.bandit import simulate_log
from recsys_router.registry import make_router
from router_contract import RouterContract

torch.set_num_threads(1)
FAST = {"max_epochs": 3, "dim": 16, "encoder_options": {"dim": 64}}


class _UniformLog:
    @pytest.fixture(scope="class")
    def data(self, sim_split):
        train = sim_split["train"]
        log, _ = simulate_log(train, np.full(train.scores.shape, 1.0 / train.n_llms), seed=0)
        return {"train": log, "test": sim_split["test"]}


class TestLoggedContract(_UniformLog, RouterContract):
    router_factory = staticmethod(lambda: make_router("logged", router="mf", params=FAST,
                                                      loss="ips", seed=0))


class TestLoggedGraphContract(_UniformLog, RouterContract):
    """The graph router trained dr in its own subgraph steps (issue 13); batches are queries
    here (one logged cell each), so 32 per step and 8 epochs give about 50 steps."""
    router_factory = staticmethod(lambda: make_router(
        "logged", router="graph", loss="dr", seed=0,
        params={"max_epochs": 8, "hidden": 16, "batch_size": 32, "encoder_options": {"dim": 64}}))


class TestLoggedALSContract(_UniformLog, RouterContract):
    """ALS with importance-weighted confidences."""
    router_factory = staticmethod(lambda: make_router(
        "logged", router="als", loss="ips", seed=0, params={"factors": 8, "iterations": 5}))


class TestLoggedBPRContract(_UniformLog, RouterContract):
    """BPR on the doubly robust pseudo-target matrix."""
    router_factory = staticmethod(lambda: make_router(
        "logged", router="bpr", loss="dr", seed=0, params={"factors": 8, "iterations": 30}))
