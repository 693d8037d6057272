"""Every baseline router passes the shared router contract (tests/router_contract.py)."""

from __future__ import annotations

import pytest
import torch
from router_contract import RouterContract

from recsys_router.registry import make_router

torch.set_num_threads(1)


class TestRandom(RouterContract):
    router_factory = staticmethod(lambda: make_router("random", seed=3))
    learns = False


class TestOracle(RouterContract):
    router_factory = staticmethod(lambda: make_router("oracle"))
    quality_margin = 0.3  # the oracle is far above random on simulated data


class TestROracle(RouterContract):
    router_factory = staticmethod(lambda: make_router("r_o", p=0.5, seed=1))


class TestBestSingle(RouterContract):
    router_factory = staticmethod(lambda: make_router("best-single"))


class TestZero(RouterContract):
    router_factory = staticmethod(lambda: make_router("zero"))
    learns = False  # query-agnostic cost/quality mixing
    budget_mode = "mean"


class TestCascade(RouterContract):
    router_factory = staticmethod(lambda: make_router("cascade", epsilon=0.1, seed=2))
    budget_mode = None  # realised-cost cap checked in test_baselines_cascade_zero.py
    keeps_others = False  # its scores are the one-hot end of the chain, which a new LLM joins


class TestKnn(RouterContract):
    router_factory = staticmethod(lambda: make_router("knn"))


class TestPRKnn(RouterContract):
    router_factory = staticmethod(lambda: make_router("prknn"))


class TestCRoberta(RouterContract):
    router_factory = staticmethod(lambda: make_router("c-roberta", n_init=3))


class TestSvm(RouterContract):
    router_factory = staticmethod(lambda: make_router("svm"))


class TestSvmRegress(RouterContract):
    router_factory = staticmethod(lambda: make_router("svm", mode="regress"))


class TestLinearR(RouterContract):
    router_factory = staticmethod(lambda: make_router("linearr"))


class TestMlpr(RouterContract):
    router_factory = staticmethod(lambda: make_router("mlpr", epochs=30))


class TestMlc(RouterContract):
    router_factory = staticmethod(lambda: make_router("mlc"))


class TestTaskBest(RouterContract):
    router_factory = staticmethod(lambda: make_router("task-best"))
