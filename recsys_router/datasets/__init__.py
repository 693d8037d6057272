"""Dataset loaders: one registry, one loader module per published format."""

from __future__ import annotations

import importlib

from .registry import available_datasets, default_data_dirs, load_dataset, register

__all__ = ["load_dataset", "available_datasets", "register", "default_data_dirs"]

# loader modules register themselves on import; listed here so the registry is complete
_LOADER_MODULES: list[str] = ["synthetic", "generic", "routerbench", "routerdc", "llmrouter", "routellm", "routereval", "embedllm"]
_loaded = False


def _ensure_loaded() -> None:
    global _loaded
    if not _loaded:
        for mod in _LOADER_MODULES:
            importlib.import_module(f"{__name__}.{mod}")
        _loaded = True
