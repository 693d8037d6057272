"""Lightning data modules over routing datasets."""

from .preference_datamodule import PreferenceDataModule, battles_from_scores, read_battles
from .routing_datamodule import MODES, N_LLM_NUMERIC_FEATURES, RoutingDataModule, llm_feature_matrix

__all__ = ["RoutingDataModule", "PreferenceDataModule", "MODES", "N_LLM_NUMERIC_FEATURES",
           "llm_feature_matrix", "battles_from_scores", "read_battles"]
