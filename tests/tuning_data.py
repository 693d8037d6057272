"""A small synthetic data config for tuning tests (one YAML file, hashing encoder)."""

from __future__ import annotations

import yaml

__all__ = ["synthetic_data_config"]


def synthetic_data_config(path, *, dim: int, n_queries: int, n_llms: int, n_topics: int):
    """Write a ``data:`` config of the synthetic set to ``path`` and return ``path``."""
    path.write_text(yaml.safe_dump({"data": {
        "class_path": "recsys_router.datamodules.routing_datamodule.RoutingDataModule",
        "init_args": {"dataset": "synthetic", "encoder": "hashing", "encoder_options": {"dim": dim},
                      "dataset_options": {"n_queries": n_queries, "n_llms": n_llms,
                                          "n_topics": n_topics, "seed": 1}}}}))
    return path
