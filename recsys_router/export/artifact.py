"""Self-contained router artifacts: write (atomically), verify, load, route.

An artifact is a directory::

    manifest.json   format version, router class and parameters, LLM pool (names, prices,
                    mean costs), encoder identity and dimension, default decision policy,
                    training-data fingerprint, evaluation metrics, package version, and the
                    SHA-256 of every other file
    state.json      the router's fitted state as a tree (see ``serialize``)
    weights.npz     every array of that state, loaded with ``allow_pickle=False``

Nothing in it is executable; loading verifies the format version and every checksum and
refuses a tampered or incomplete artifact with a clear error.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..encoders.cache import text_key
from ..policies import apply_policy
from ..router import Router
from .serialize import SerializationError, from_tree, to_tree

__all__ = ["FORMAT_VERSION", "ArtifactError", "export_router", "load_router", "ExportedRouter",
           "verify_artifact",
           "data_fingerprint", "set_default_policy"]

FORMAT_VERSION = 1
_FILES = ("state.json", "weights.npz")


class ArtifactError(ValueError):
    """An artifact directory is missing, incomplete, tampered with, or of another format."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def data_fingerprint(data: RoutingData) -> str:
    """SHA-256 over query ids, LLM names, scores and costs of a dataset (first 16 hex digits)."""
    h = hashlib.sha256()
    h.update("\x1f".join(data.query_ids).encode())
    h.update("\x1e".join(data.llm_names).encode())
    h.update(np.ascontiguousarray(data.scores).tobytes())
    if data.costs is not None:
        h.update(np.ascontiguousarray(data.costs).tobytes())
    return h.hexdigest()[:16]


def _jsonable(v):
    try:
        json.dumps(v)
        return v
    except TypeError:
        return repr(v)


def _encoder_info(router: Router) -> dict | None:
    enc = getattr(router, "encoder_", None)
    if enc is not None:
        return {"identity": getattr(enc, "identity", str(enc)), "dim": getattr(enc, "dim", None)}
    name = getattr(router, "encoder", None)
    return {"identity": str(name), "dim": None} if name is not None else None


def _write_json(path: Path, obj) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=False, allow_nan=False)
        fh.write("\n")


def export_router(router: Router, out: str | os.PathLike, *, train_data: RoutingData | None = None,
                  metrics: dict | None = None, llms: pd.DataFrame | None = None,
                  policy: str = "argmax", policy_value: float | None = None,
                  overwrite: bool = False) -> Path:
    """Write a fitted router as a self-contained artifact directory.

    The directory is assembled in a temporary sibling folder and renamed into place at the
    end, so an interrupted export leaves nothing half-written at ``out``.

    Parameters
    ----------
    router : Router
        A fitted router.
    out : path
        Target directory (must not exist unless ``overwrite``).
    train_data : RoutingData, optional
        Used for the data fingerprint and the LLM table (prices, mean costs).
    metrics : dict, optional
        Evaluation metrics to record (name -> number).
    llms : DataFrame, optional
        LLM table (``name``, prices...) when ``train_data`` is not given.
    policy, policy_value : str, float
        Default decision policy (``argmax``, ``wtp`` with lambda, ``budget`` with C).
    overwrite : bool
        Replace an existing directory.

    Returns
    -------
    pathlib.Path
        The artifact directory.

    Example
    -------
    >>> export_router(router, "out/knn", train_data=train)  # doctest: +SKIP
    """
    if not router.is_fitted:
        raise ArtifactError(f"cannot export an unfitted {type(router).__name__}: call fit first")
    _check_policy(policy, policy_value)
    out = Path(out)
    if out.exists() and not overwrite:
        raise ArtifactError(f"{out} already exists; pass overwrite=True (CLI: --overwrite)")
    out.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    try:
        tree = to_tree(router, arrays)
    except SerializationError as exc:
        raise ArtifactError(f"{type(router).__name__} cannot be exported: {exc}") from exc
    table = train_data.llms if train_data is not None else llms
    names = list(router.llm_names_)
    pool = []
    for j, n in enumerate(names):
        row = {"name": n}
        if table is not None and n in set(table["name"]):
            r = table.set_index("name").loc[n]
            for col in ("input_price", "output_price", "size"):
                v = r.get(col)
                row[col] = None if v is None or pd.isna(v) else float(v)
        mc = router.llm_mean_costs()
        row["mean_cost"] = None if mc is None or np.isnan(mc[j]) else float(mc[j])
        info = (getattr(router, "llm_info_", None) or {}).get(n)
        row["provenance"] = _jsonable(info) if info else {"origin": "fit"}
        pool.append(row)
    from .. import __version__
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        _write_json(tmp / "state.json", tree)
        with open(tmp / "weights.npz", "wb") as fh:
            np.savez(fh, **arrays)
        manifest = {
            "format": "recsys-router-artifact", "format_version": FORMAT_VERSION,
            "package_version": __version__,
            "router_class": f"{type(router).__module__}:{type(router).__qualname__}",
            "router_params": {k: _jsonable(v) for k, v in router.get_params().items()},
            "llms": pool, "encoder": _encoder_info(router),
            "uses_text": bool(router.uses_text), "uses_ground_truth": bool(router.uses_ground_truth),
            "default_policy": {"name": policy, "value": policy_value},
            "training_data": None if train_data is None else {
                "name": train_data.name, "fingerprint": data_fingerprint(train_data),
                "n_queries": train_data.n_queries, "n_llms": train_data.n_llms},
            "metrics": {k: (float(v) if v is not None and np.isfinite(float(v)) else None)
                        for k, v in (metrics or {}).items()},
            "files": {f: _sha256(tmp / f) for f in _FILES},
        }
        _write_json(tmp / "manifest.json", manifest)
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _check_policy(policy: str, value) -> None:
    if policy not in ("argmax", "wtp", "budget"):
        raise ArtifactError(f"unknown policy {policy!r}; expected argmax, wtp or budget")
    if policy != "argmax" and (value is None or not np.isfinite(value) or value < 0):
        raise ArtifactError(f"policy {policy!r} needs a finite value >= 0, got {value!r}")


def _read_manifest(path: Path) -> dict:
    mf = path / "manifest.json"
    if not path.is_dir():
        raise ArtifactError(f"{path}: not an artifact directory (it does not exist)")
    if not mf.exists():
        raise ArtifactError(f"{path}: incomplete artifact, manifest.json is missing")
    try:
        manifest = json.loads(mf.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{mf}: not valid JSON ({exc})") from exc
    if manifest.get("format") != "recsys-router-artifact":
        raise ArtifactError(f"{mf}: not a recsys-router artifact manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ArtifactError(f"{mf}: format_version {manifest.get('format_version')!r} is not supported "
                            f"(this package reads version {FORMAT_VERSION})")
    return manifest


def verify_artifact(path: str | os.PathLike) -> dict:
    """Check format version and every file's checksum; return the manifest."""
    path = Path(path)
    manifest = _read_manifest(path)
    files = manifest.get("files") or {}
    for f in _FILES:
        if f not in files:
            raise ArtifactError(f"{path}/manifest.json: no checksum for {f}")
        p = path / f
        if not p.exists():
            raise ArtifactError(f"{path}: incomplete artifact, {f} is missing")
        if _sha256(p) != files[f]:
            raise ArtifactError(f"{p}: checksum mismatch (the file was modified or corrupted)")
    return manifest


def load_router(path: str | os.PathLike) -> "ExportedRouter":
    """Load and verify an artifact directory written by :func:`export_router`.

    Raises
    ------
    ArtifactError
        Missing/extra-version/tampered/incomplete artifacts.

    Example
    -------
    >>> r = load_router("out/knn")                       # doctest: +SKIP
    >>> r.route(["What is 2+2?"], wtp=100.0)[0]["llm"]   # doctest: +SKIP
    """
    path = Path(path)
    manifest = verify_artifact(path)
    tree = json.loads((path / "state.json").read_text(encoding="utf-8"))
    with np.load(path / "weights.npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    try:
        router = from_tree(tree, arrays)
    except (SerializationError, ImportError, AttributeError) as exc:
        raise ArtifactError(f"{path}: cannot rebuild the router: {exc}") from exc
    if not isinstance(router, Router):
        raise ArtifactError(f"{path}: state.json does not hold a Router")
    return ExportedRouter(router, manifest, path)


def _custom_routing(router: Router) -> bool:
    """Whether the router decides with its own ``route_indices`` (not scores + a policy)."""
    return type(router).route_indices is not Router.route_indices


class ExportedRouter:
    """A loaded artifact: the router plus its manifest, routing raw texts.

    ``route`` encodes texts inside (through the router's encoder and its cache) and
    returns, per query, the chosen LLM, every candidate's predicted score and cost, and
    the policy used. Texts get query ids derived from their content, so a text is routed
    the same way whatever else is in its batch (seeded routers draw per query id), and a
    text repeated in one batch is predicted once.
    """

    def __init__(self, router: Router, manifest: dict, path: Path | None = None):
        self.router = router
        self.manifest = manifest
        self.path = path

    @property
    def llm_names(self) -> list[str]:
        return list(self.router.llm_names_)

    @property
    def default_policy(self) -> tuple[str, float | None]:
        p = self.manifest.get("default_policy") or {"name": "argmax", "value": None}
        return p["name"], p.get("value")

    @property
    def custom_routing(self) -> bool:
        """True when the router chooses through its own ``route_indices`` (e.g. zero)."""
        return _custom_routing(self.router)

    def to_data(self, texts: Sequence[str]) -> RoutingData:
        """Wrap distinct raw texts as an unlabelled RoutingData over this router's LLM pool
        (query ids ``t<sha1 of the text>``)."""
        texts = [str(t) for t in texts]
        if not texts:
            raise ValueError("no queries to route")
        ids = ["t" + text_key(t)[:20] for t in texts]
        if len(set(ids)) != len(ids):
            raise ValueError("to_data expects distinct texts (route() removes repeats itself)")
        q = pd.DataFrame({"query_id": ids, "text": texts})
        return RoutingData(q, self.llm_names, np.full((len(texts), len(self.llm_names)), np.nan),
                           name="requests")

    def _unique(self, texts: Sequence[str]) -> tuple[RoutingData, np.ndarray]:
        texts = [str(t) for t in texts]
        uniq, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
        return self.to_data(list(uniq)), inverse.ravel()

    def predict(self, queries) -> tuple[np.ndarray, np.ndarray | None, RoutingData]:
        """Predicted scores and costs, shape (n, n_llms), of raw texts or a RoutingData.

        Returns ``(scores, costs, data)``; for texts, ``data`` holds the distinct texts and
        the arrays are expanded back to one row per given text.
        """
        if isinstance(queries, RoutingData):
            data, inverse = queries, None
        else:
            data, inverse = self._unique(queries)
        if self.router.uses_ground_truth and np.isnan(data.scores).all():
            raise ValueError(f"{type(self.router).__name__} routes from ground-truth scores; "
                             "give it a RoutingData with scores, not raw texts")
        scores, costs = self.router.predict_scores(data), self.router.predict_costs(data)
        if inverse is not None:
            scores = scores[inverse]
            costs = None if costs is None else costs[inverse]
        return scores, costs, data

    def decide(self, queries, scores: np.ndarray, costs: np.ndarray | None, *,
               wtp: float | None = None, budget: float | None = None,
               candidates: Sequence[str] | None = None) -> tuple[np.ndarray, str, float | None]:
        """Chosen column per query from predictions (the default policy when neither
        ``wtp`` nor ``budget`` is given); returns ``(choices, policy, value)``."""
        if wtp is None and budget is None:
            name, value = self.default_policy
            if name == "wtp":
                wtp = value
            elif name == "budget":
                budget = value
        if wtp is not None and budget is not None:
            raise ValueError("give either wtp or budget, not both")
        mask = self.router.candidate_mask(candidates)
        if self.custom_routing:
            if isinstance(queries, RoutingData):
                choice = self.router.route_indices(queries, wtp=wtp, budget=budget,
                                                   candidates=candidates)
            else:
                data, inverse = self._unique(queries)
                choice = self.router.route_indices(data, wtp=wtp, budget=budget,
                                                   candidates=candidates)[inverse]
            policy = "wtp" if wtp is not None else "budget" if budget is not None else "argmax"
        else:
            choice, policy = apply_policy(scores, costs, wtp=wtp, budget=budget, mask=mask)
        value = wtp if policy == "wtp" else budget if policy == "budget" else None
        return np.asarray(choice), policy, value

    def route(self, queries, *, wtp: float | None = None, budget: float | None = None,
              candidates: Sequence[str] | None = None) -> list[dict]:
        """Route raw texts (or a RoutingData); the artifact's default policy when neither
        ``wtp`` nor ``budget`` is given.

        Returns
        -------
        list of dict
            ``{"llm", "policy", "policy_value", "scores": {llm: s}, "costs": {llm: c}}`` per
            query (``costs`` is None when the router predicts none).

        Example
        -------
        >>> load_router("out/knn").route(["What is 2+2?"], wtp=100.0)[0]["llm"]  # doctest: +SKIP
        'gpt-4'
        """
        scores, costs, _ = self.predict(queries)
        choice, policy, value = self.decide(queries, scores, costs, wtp=wtp, budget=budget,
                                            candidates=candidates)
        return self.results(choice, policy, value, scores, costs, candidates)

    def results(self, choice, policy, value, scores, costs, candidates=None) -> list[dict]:
        """Per-query result dicts (see :meth:`route`)."""
        mask = self.router.candidate_mask(candidates)
        names = self.llm_names
        keep = range(len(names)) if mask is None else np.flatnonzero(mask)
        out = []
        for i, c in enumerate(choice):
            out.append({"llm": names[c], "policy": policy, "policy_value": value,
                        "scores": {names[j]: float(scores[i, j]) for j in keep},
                        "costs": None if costs is None else {names[j]: float(costs[i, j]) for j in keep}})
        return out


def set_default_policy(path: str | os.PathLike, policy: str, value: float | None,
                       extra: dict | None = None) -> dict:
    """Rewrite the artifact's default policy (manifest only; checksums of the data files
    are unchanged). The manifest is replaced atomically."""
    path = Path(path)
    manifest = verify_artifact(path)
    _check_policy(policy, value)
    manifest["default_policy"] = {"name": policy, "value": value, **(extra or {})}
    tmp = path / ".manifest.json.tmp"
    _write_json(tmp, manifest)
    os.replace(tmp, path / "manifest.json")
    return manifest
