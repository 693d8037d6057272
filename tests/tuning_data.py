"""A small synthetic data config for tuning tests (one YAML file, hashing encoder)."""

from __future__ import annotations

import pytest
import yaml

__all__ = ["synthetic_data_config", "one_torch_thread"]


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Run a test with one PyTorch thread (autouse where a test module imports it)."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def synthetic_data_config(path, *, dim: int, n_queries: int, n_llms: int, n_topics: int):
    """Write a ``data:`` config of the synthetic set to ``path`` and return ``path``."""
    path.write_text(yaml.safe_dump({"data": {
        "class_path": "recsys_router.datamodules.routing_datamodule.RoutingDataModule",
        "init_args": {"dataset": "synthetic", "encoder": "hashing", "encoder_options": {"dim": dim},
                      "dataset_options": {"n_queries": n_queries, "n_llms": n_llms,
                                          "n_topics": n_topics, "seed": 1}}}}))
    return path
