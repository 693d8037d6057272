"""RouteJudge: preference-based evaluation of routers by judged duels.

Records of judged comparisons (:mod:`.records`), a SQLite store (:mod:`.store`), metrics
(:mod:`.metrics`, :mod:`.rating`), historical replay (:mod:`.replay`), offline tournaments on
recorded scores (:mod:`.simulate`), reports (:mod:`.report`) and a local voting page (:mod:`.web`).

Reference
---------
G. Lai, H. Hu, H.-J. Ye, "RouteJudge: An Open Platform for Reproducible and Preference-Aware LLM
Routing", arXiv:2606.18774 (2026): duel selection, attribution (eq. 1), historical replay (eq. C.21).
"""

from __future__ import annotations

from .metrics import (agreement, cohen_kappa, consensus_strength, h2h, h2h_matrix, leaderboard, mcnemar,
                      pareto_frontier, participation_rate, pref_score, vote_entropy, win_rate)
from .rating import bradley_terry, elo_bootstrap, elo_ratings, games
from .records import LABELS, JudgeRecord, attribute, count_votes, select_duel
from .store import JudgeStore

__all__ = ["LABELS", "JudgeRecord", "JudgeStore", "attribute", "count_votes", "select_duel",
           "participation_rate", "pref_score", "win_rate", "h2h", "h2h_matrix", "mcnemar",
           "vote_entropy", "agreement", "cohen_kappa", "consensus_strength", "pareto_frontier",
           "leaderboard", "games", "elo_ratings", "elo_bootstrap", "bradley_terry"]
