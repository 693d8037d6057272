"""Router evaluation metrics from four papers, as pure vectorised numpy functions.

* :mod:`.routereval` - mu_o, V_R, V_B, E_p, oracle and r_o(p) references (RouterEval).
* :mod:`.routerbench` - cost-quality points, willingness-to-pay sweep, NDCH, AIQ, Zero router.
* :mod:`.orbit` - budget sweep, Pareto front, nAUC (code and paper), Peak, QNC/rQNC, RCI.
* :mod:`.routellm` - threshold sweep, APGR, CPT(50%/80%) for strong/weak pairs.

:data:`DIRECTIONS` maps every reported metric name to ``"higher"``, ``"lower"`` or ``"none"``.
"""

from __future__ import annotations

from .base import DIRECTIONS, BestSingle, best_single, complete_rows, entropy_bits, metric
from .orbit import (QNC, BudgetCurve, budget_choices, budget_grid, budget_sweep, nauc_code,
                    nauc_paper, orbit_metrics, pareto_front, peak_score, qnc, rci)
from .routerbench import (aiq, aiq_code, aiq_many, default_lambdas, hull_value, interpolate,
                          llm_points, ndch, routerbench_metrics, shared_domain, wtp_sweep,
                          zero_router)
from .routellm import ThresholdCurve, apgr, cpt, routellm_metrics, threshold_sweep
from .routereval import (REFERENCE_SCORES, expected_ro_mean, mean_prob_entropy, mu_o,
                         oracle_choices, oracle_mean, routereval_metrics, selection_entropy, v_b,
                         v_r)

__all__ = [
    "DIRECTIONS", "BestSingle", "best_single", "complete_rows", "entropy_bits", "metric",
    "QNC", "BudgetCurve", "budget_choices", "budget_grid", "budget_sweep", "nauc_code",
    "nauc_paper", "orbit_metrics", "pareto_front", "peak_score", "qnc", "rci",
    "aiq", "aiq_code", "aiq_many", "default_lambdas", "hull_value", "interpolate", "llm_points", "ndch",
    "routerbench_metrics", "shared_domain", "wtp_sweep", "zero_router",
    "ThresholdCurve", "apgr", "cpt", "routellm_metrics", "threshold_sweep",
    "REFERENCE_SCORES", "expected_ro_mean", "mean_prob_entropy", "mu_o", "oracle_choices",
    "oracle_mean", "routereval_metrics", "selection_entropy", "v_b", "v_r",
]
