"""Dataset loaders: one registry, one loader module per published format.

Each module of this package registers its format with
:func:`~recsys_router.datasets.registry.register`; the registry imports them all on first
use (adding a format is adding one file).
"""

from __future__ import annotations

from .registry import (DATASETS, available_datasets, dataset_spec, default_data_dirs, load_dataset,
                       register)

__all__ = ["load_dataset", "available_datasets", "register", "default_data_dirs", "dataset_spec",
           "DATASETS"]
