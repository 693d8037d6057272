"""Learning from production feedback: decision log, exploration with propensities,
off-policy evaluation and training from logged feedback."""

from .explore import ExplorationPolicy, parse_explore
from .ope import estimate_all
from .store import DecisionLog, DecisionWriter

__all__ = ["ExplorationPolicy", "parse_explore", "estimate_all", "DecisionLog", "DecisionWriter"]
