"""The router contract for the ``logged`` registry router (trained on a simulated log that
reveals one LLM per training query; tested on the full matrix)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.feedback.bandit import simulate_log
from recsys_router.registry import make_router
from router_contract import RouterContract

torch.set_num_threads(1)
FAST = {"max_epochs": 3, "dim": 16, "encoder_options": {"dim": 64}}


class TestLoggedContract(RouterContract):
    router_factory = staticmethod(lambda: make_router("logged", router="mf", params=FAST,
                                                      loss="ips", seed=0))

    @pytest.fixture(scope="class")
    def data(self, sim_split):
        train = sim_split["train"]
        log, _ = simulate_log(train, np.full(train.scores.shape, 1.0 / train.n_llms), seed=0)
        return {"train": log, "test": sim_split["test"]}
