"""Download the datasets that live on the Hugging Face hub into a local cache folder.

``download_dataset("routerbench")`` fetches the files the loader needs (not the whole
repository) with :func:`huggingface_hub.snapshot_download` into
``<cache_dir>/<dataset folder>``; ``load_dataset(name)`` then finds them there. The cache
is ``$RECSYS_ROUTER_CACHE`` or ``~/.cache/recsys_router/datasets``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache_dir", "download_dataset", "hub_hint"]


def default_cache_dir() -> Path:
    """``$RECSYS_ROUTER_CACHE`` or ``~/.cache/recsys_router/datasets``."""
    env = os.environ.get("RECSYS_ROUTER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "recsys_router" / "datasets"


def _spec(name: str):
    from .registry import DATASETS, dataset_spec
    spec = dataset_spec(name)
    if spec is None:
        raise ValueError(f"unknown dataset {name!r}")
    if not spec.hub_repo:
        hub = sorted(n for n, s in DATASETS.items() if s.hub_repo)
        raise ValueError(f"dataset {spec.name!r} is not on the Hugging Face hub; downloadable: {hub}")
    return spec


def hub_hint(name: str) -> str:
    """One sentence telling how to get a hub dataset's files."""
    spec = _spec(name)
    return (f"Download it with `recsys-router data download {spec.name}` (needs internet; Hugging "
            f"Face dataset https://huggingface.co/datasets/{spec.hub_repo}, files "
            f"{', '.join(spec.hub_files)}) or put those files in "
            f"{default_cache_dir() / (spec.folder or spec.name)}.")


def download_dataset(name: str, cache_dir=None, *, allow_patterns=None, revision: str | None = None,
                     token=None) -> Path:
    """Fetch a hub dataset's files and return the local folder the loader reads.

    Parameters
    ----------
    name : str
        ``routerbench``, ``routereval`` or ``embedllm``.
    cache_dir : str or Path, optional
        Parent folder (default :func:`default_cache_dir`); files go to
        ``<cache_dir>/<dataset folder>``.
    allow_patterns : sequence of str, optional
        Override the file patterns (e.g. one RouterEval benchmark:
        ``["router_dataset/arc_router_dataset.pkl"]``).
    revision, token
        Passed to :func:`huggingface_hub.snapshot_download`.

    Returns
    -------
    Path

    Raises
    ------
    ConnectionError
        When the hub cannot be reached; the message says where to put the files by hand.
    """
    spec = _spec(name)
    target = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = target / (spec.folder or spec.name)
    target.mkdir(parents=True, exist_ok=True)
    patterns = list(allow_patterns or spec.hub_files)
    from huggingface_hub import snapshot_download
    try:
        snapshot_download(repo_id=spec.hub_repo, repo_type="dataset", local_dir=str(target),
                          allow_patterns=patterns, revision=revision, token=token)
    except Exception as exc:  # noqa: BLE001 - offline, HTTP and auth errors alike
        raise ConnectionError(
            f"could not download {spec.name!r} from https://huggingface.co/datasets/{spec.hub_repo} "
            f"({type(exc).__name__}: {exc}). Without internet, copy the files {patterns} into "
            f"{target} by hand.") from exc
    return target
