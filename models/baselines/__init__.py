"""Classic baseline routers (RouterBench, RouterEval).

Every class is a :class:`recsys_router.router.Router`; build them by name with
:func:`recsys_router.registry.make_router`.
"""

from __future__ import annotations

from .cascade import CascadeRouter
from .cluster import ClusterRouter
from .neighbours import KNNRouter, PRKnnRouter
from .regression import LinearRRouter, MLCRouter, MLPRRouter
from .simple import BestSingleRouter, OracleRouter, RandomRouter, ROracleRouter, TaskBestRouter
from .svm import SVMRouter
from .zero import ZeroRouter, nondecreasing_hull

__all__ = ["RandomRouter", "OracleRouter", "ROracleRouter", "BestSingleRouter", "TaskBestRouter",
           "ZeroRouter",
           "CascadeRouter", "KNNRouter", "PRKnnRouter", "ClusterRouter", "SVMRouter",
           "LinearRRouter", "MLPRRouter", "MLCRouter", "nondecreasing_hull"]
