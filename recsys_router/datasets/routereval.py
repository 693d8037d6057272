"""RouterEval router datasets (Huang et al., 2025, "RouterEval: A Comprehensive Benchmark for
Routing LLMs to Explore Model-level Scaling Up in LLMs"; Hugging Face ``linggm/RouterEval``).

``router_dataset/<benchmark>_router_dataset.pkl`` is a dict::

    split_index: {train_indices, val_indices, test_indices}      # positions in the benchmark
    prompt:      {train_prompt, val_prompt, test_prompt}          # texts, same order
    embedding:   {train_embed, ...}                               # not used here
    easy: {3: G, 5: G}, hard: {10: G, 100: G, 1000: G}            # pool size m -> groups
    G = {all_strong | all_weak | strong_to_weak:
         {"model": [m names], "data": {train_score, val_score, test_score: (n_split x m)}}}

Each (difficulty, m, group) is one :class:`RoutingData` whose queries are the train, val
and test rows in that order (``split`` column = the published split), ids
``"<benchmark>-<index>"``. Cost proxy: the parameter count in billions parsed from each LLM
name (``-7b`` -> 7, ``8x7b`` -> 56, ``1.5B``, ``70B``; NaN when the name has none), stored
as ``llms.size`` and as every query's cost for that LLM.

Unpickling runs code the file chooses: the loader reads a pickle only with
``trust_pickle=True`` (``--trust-pickle`` on the command line) and refuses otherwise.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..errors import DataValidationError
from ._common import parse_size, require_trust
from .registry import register

__all__ = ["load_routereval", "routereval_dict_to_data", "detect_routereval", "ROUTEREVAL_GROUPS"]

ROUTEREVAL_GROUPS = ("all_strong", "all_weak", "strong_to_weak")
_SPLITS = ("train", "val", "test")
_SUFFIX = "_router_dataset.pkl"


def _get(d, key, source, where):
    if not isinstance(d, dict) or key not in d:
        have = list(d) if isinstance(d, dict) else type(d).__name__
        raise DataValidationError(f"missing key {key!r} under {where or 'the top level'} "
                                  f"(present: {have})", source=source, column=f"{where}/{key}".lstrip("/"))
    return d[key]


def _norm_group(group: str) -> str:
    g = str(group).replace("-", "_").lower()
    if g not in ROUTEREVAL_GROUPS:
        raise ValueError(f"group must be one of {ROUTEREVAL_GROUPS} (or with '-'), got {group!r}")
    return g


def routereval_dict_to_data(raw: dict, *, benchmark: str, source: str, difficulty=None, m=None,
                            group=None):
    """Convert a loaded RouterEval dict; see :func:`load_routereval` for the options."""
    if not isinstance(raw, dict):
        raise DataValidationError(f"expected a dict in the pickle, got {type(raw).__name__}",
                                  source=source)
    idx = _get(raw, "split_index", source, "")
    indices = {s: np.asarray(_get(idx, f"{s}_indices", source, "split_index")).astype(np.int64)
               for s in _SPLITS}
    prompts = raw.get("prompt")
    texts = []
    for s in _SPLITS:
        if isinstance(prompts, dict) and f"{s}_prompt" in prompts:
            p = [str(t) for t in np.asarray(prompts[f"{s}_prompt"], dtype=object).tolist()]
            if len(p) != len(indices[s]):
                raise DataValidationError(f"{len(p)} {s} prompts but {len(indices[s])} {s} indices",
                                          source=source, column=f"prompt/{s}_prompt")
            texts += p
        else:
            texts += [None] * len(indices[s])
    all_idx = np.concatenate([indices[s] for s in _SPLITS])
    queries = pd.DataFrame({"query_id": [f"{benchmark}-{i}" for i in all_idx], "text": texts,
                            "task": benchmark,
                            "split": np.repeat(_SPLITS, [len(indices[s]) for s in _SPLITS])})
    queries["index"] = all_idx
    want_g = None if group is None else _norm_group(group)
    out = {}
    for diff in ("easy", "hard"):
        if diff not in raw or (difficulty is not None and diff != difficulty):
            continue
        for pool, groups in raw[diff].items():
            if m is not None and int(pool) != int(m):
                continue
            for g, entry in groups.items():
                if want_g is not None and g.replace("-", "_") != want_g:
                    continue
                where = f"{diff}/{pool}/{g}"
                names = [str(n) for n in np.asarray(_get(entry, "model", source, where)).tolist()]
                dat = _get(entry, "data", source, where)
                blocks = []
                for s in _SPLITS:
                    a = np.asarray(_get(dat, f"{s}_score", source, f"{where}/data"), dtype=np.float64)
                    if a.ndim != 2 or a.shape != (len(indices[s]), len(names)):
                        raise DataValidationError(
                            f"{s}_score has shape {a.shape}, expected ({len(indices[s])}, "
                            f"{len(names)}) = ({s} indices, models)", source=source,
                            column=f"{where}/data/{s}_score")
                    blocks.append(a)
                size = np.array([parse_size(n) for n in names])
                llms = pd.DataFrame({"name": names, "size": size})
                scores = np.vstack(blocks)
                costs = np.broadcast_to(size, scores.shape)
                out[where] = RoutingData(queries, llms, scores, costs,
                                         name=f"routereval-{benchmark}-{diff}-{pool}-{g}",
                                         source=source,
                                         meta={"difficulty": diff, "m": int(pool), "group": g,
                                               "cost": "parameter count (billions) from the name"})
    if not out:
        raise KeyError(f"{source}: no candidate group matches difficulty={difficulty!r}, m={m!r}, "
                       f"group={group!r}; available: {_available(raw)}")
    if difficulty is not None and m is not None and group is not None and len(out) == 1:
        return next(iter(out.values()))
    return out


def _available(raw) -> list[str]:
    return [f"{d}/{p}/{g}" for d in ("easy", "hard") if isinstance(raw.get(d), dict)
            for p, gs in raw[d].items() for g in (gs if isinstance(gs, dict) else {})]


def _find_pickles(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    for folder in (path / "router_dataset", path):
        found = sorted(folder.glob(f"*{_SUFFIX}")) if folder.is_dir() else []
        if found:
            return found
    return []


def detect_routereval(path: Path) -> bool:
    path = Path(path)
    if path.is_file():
        return path.name.endswith(_SUFFIX)
    return bool(_find_pickles(path)) if path.is_dir() else False


@register("routereval", folder="routereval", hub_repo="linggm/RouterEval",
          hub_files=("router_dataset/*_router_dataset.pkl", "*_router_dataset.pkl"),
          detect=detect_routereval,
          description="RouterEval router_dataset pickles (12 benchmarks, candidate pools of 3 to "
                      "1,000 LLMs; cost proxy = parameter count)")
def load_routereval(path, benchmark: str | None = None, difficulty: str | None = None,
                    m: int | None = None, group: str | None = None, trust_pickle: bool = False):
    """Load a RouterEval ``<benchmark>_router_dataset.pkl``.

    Parameters
    ----------
    path : str or Path
        The pickle, a ``router_dataset`` folder, or a folder holding one.
    benchmark : str, optional
        Which ``<benchmark>_router_dataset.pkl`` to read from a folder (needed when it
        holds several).
    difficulty : {"easy", "hard"}, optional
    m : int, optional
        Candidate pool size (3, 5, 10, 100, 1000).
    group : {"all_strong", "all_weak", "strong_to_weak"}, optional
        ``"all-strong"`` style spellings are accepted.
    trust_pickle : bool
        You trust the file's origin (unpickling may run code); required to read it.

    Returns
    -------
    RoutingData or dict of RoutingData
        One dataset when difficulty, m and group are all given; otherwise a dict keyed
        ``"easy/5/all_strong"`` over the matching candidate groups.

    Example
    -------
    >>> d = load_routereval("data/routereval", benchmark="arc", difficulty="easy", m=5,
    ...                     group="all-strong", trust_pickle=True)  # doctest: +SKIP
    """
    path = Path(path)
    files = _find_pickles(path)
    if benchmark is not None:
        files = [f for f in files if f.name == f"{benchmark}{_SUFFIX}"]
    if not files:
        raise FileNotFoundError(f"{path}: no {benchmark or '<benchmark>'}{_SUFFIX} found; download "
                                f"with `recsys-router data download routereval`")
    if len(files) > 1:
        raise ValueError(f"{path}: several benchmarks ({[f.name[:-len(_SUFFIX)] for f in files]}); "
                         f"pass benchmark=...")
    f = files[0]
    require_trust(f, trust_pickle)
    try:
        with open(f, "rb") as fh:
            raw = pickle.load(fh)  # noqa: S301 - published dataset format
    except Exception as exc:  # noqa: BLE001
        raise DataValidationError(f"cannot read the pickle: {exc}", source=str(f)) from None
    bench = f.name[: -len(_SUFFIX)] if f.name.endswith(_SUFFIX) else f.stem
    return routereval_dict_to_data(raw, benchmark=bench, source=str(f), difficulty=difficulty, m=m,
                                   group=group)
