"""Router artifacts, format 2: data only by construction. Write (atomically), verify, load.

An artifact is a directory holding exactly three files::

    manifest.json   format version, router class (an exact registered name) and parameters,
                    LLM pool (names, prices, mean costs), encoder identity, default policy,
                    training-data fingerprint, metrics, training score range, package
                    version, the dtype and shape of every array, the SHA-256 of the two
                    other files and, optionally, an HMAC-SHA256 signature of the manifest
                    itself; after ``onboard``, ``training_data.onboarded`` and
                    ``source_metrics`` (:mod:`recsys_router.export.provenance`)
    state.json      the router's declared fitted state (``Router._get_state``): JSON only
    weights.npz     the declared arrays, uncompressed, numeric dtypes only

Loading never imports a name or runs code that the files choose: the router class comes
from an explicit table of registered classes, the state is validated against the class's
declared spec (types, dtypes, shapes) before the class's own ``_from_state`` rebuilds it,
and every read is bounded (JSON size and depth, array sizes checked against the manifest
before allocation, a total-size cap). Every failure is an :class:`ArtifactError` naming
the file and field. Which folder an export may write, and the tidying of what a killed export
left behind, are :mod:`recsys_router.export.target`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import replace_dir, temp_dir
from ..coldstart.pool import answer_score_range
from ..data import RoutingData
from ..router import Router
from ..router_state import class_table, encoder_param, router_from_state, router_to_state
from ..state import StateError, json_safe
from .exported import ExportedRouter, router_uses_tasks
from .provenance import check_onboard_fields, check_onboarded_origin, warn_other_encoder
from .safe_io import LimitError, NpzReader, parse_json, sha256_file
# where an export may write; both names re-exported here (their public path before target.py)
from .target import check_export_target, clean_stale
from .verify import (_FILES, FORMAT_VERSION, LIMITS, ArtifactError, check_listing, check_policy,
                     declared_arrays, key_bytes, read_verified, signature, verify_artifact)

__all__ = ["FORMAT_VERSION", "ArtifactError", "export_router", "load_router", "ExportedRouter",
           "verify_artifact", "data_fingerprint", "set_default_policy", "LIMITS", "clean_stale",
           "check_export_target", "TASKS_WARNING"]

#: what load_router says about an artifact whose routing reads task labels
TASKS_WARNING = ("{cls} routes by each query's task label: pass tasks=[...] (one label per "
                 "text) to route() (over HTTP: 'task' / 'tasks' in POST /route, 'task' in the "
                 "OpenAI proxy's body); a text routed without one is routed as a query with no "
                 "task (task-best: the best single LLM)")


def data_fingerprint(data: RoutingData) -> str:
    """SHA-256 over query ids, LLM names, scores and costs of a dataset (first 16 hex digits)."""
    h = hashlib.sha256()
    h.update("\x1f".join(data.query_ids).encode())
    h.update("\x1e".join(data.llm_names).encode())
    h.update(np.ascontiguousarray(data.scores).tobytes())
    if data.costs is not None:
        h.update(np.ascontiguousarray(data.costs).tobytes())
    return h.hexdigest()[:16]


def _npz_bytes(declared: dict) -> int:
    """Most bytes an uncompressed ``.npz`` of the declared arrays can take: their data plus,
    per member, a ``.npy`` header (at most 4 KiB) and its zip records, plus the archive's
    end records. Loading reads ``weights.npz`` whole, so this bounds its memory by the
    arrays it declares."""
    data = sum(int(np.prod(shape, dtype=object)) * dtype.itemsize
               for dtype, shape in declared.values())
    return data + 8192 * len(declared) + 65_536


def _write_json(path: Path, obj) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, allow_nan=False)
        fh.write("\n")


def _pool(router: Router, table: pd.DataFrame | None) -> list[dict]:
    index = table.set_index("name") if table is not None else None
    mc = router.llm_mean_costs()
    info = getattr(router, "llm_info_", None) or {}
    pool = []
    for j, n in enumerate(router.llm_names_):
        row = {"name": n}
        if index is not None and n in index.index:
            for col in ("input_price", "output_price", "size"):
                v = index.loc[n].get(col)
                row[col] = None if v is None or pd.isna(v) else float(v)
        row["mean_cost"] = None if mc is None or np.isnan(mc[j]) else float(mc[j])
        row["provenance"] = json_safe(info[n]) if info.get(n) else {"origin": "fit"}
        pool.append(row)
    return pool


def _encoder_info(router: Router) -> dict | None:
    if not router.uses_text:
        return None
    enc = getattr(router, "encoder_", None)
    if enc is not None and hasattr(enc, "identity"):  # a precomputed table's: without its path
        ident = enc.stored_identity() if hasattr(enc, "stored_identity") else enc.identity
        return {"identity": str(ident), "dim": int(enc.dim)}
    # a wrapper's: by built-in name, never a file's path; the one it was fitted with
    name = router.params_at_fit().get("encoder")
    return {"identity": encoder_param(name), "dim": None} if name is not None else None


def export_router(router: Router, out: str | os.PathLike, *, train_data: RoutingData | None = None,
                  metrics: dict | None = None, llms: pd.DataFrame | None = None,
                  policy: str = "argmax", policy_value: float | None = None,
                  overwrite: bool = False, sign_key: str | bytes | None = None,
                  training_info: dict | None = None, source_metrics: dict | None = None) -> Path:
    """Write a fitted router as a format-2 artifact directory.

    The directory is assembled in a temporary sibling (``.NAME.tmp-PID-*``) and renamed
    into place at the end (an artifact it replaces is first moved aside to
    ``.NAME.old-PID-*``); a sibling left by a killed export is removed by the next export or
    load of the same target, after putting back an artifact it had moved aside.

    Parameters
    ----------
    router : Router
        A fitted router of a registered class.
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
        Replace an existing artifact or empty folder (any other folder, one holding files
        that are not artifact files, or a symbolic link is an :class:`ArtifactError`).
    sign_key : str or bytes, optional
        Write an HMAC-SHA256 of the manifest (checked by ``load_router(sign_key=...)``).
    training_info, source_metrics : dict, optional
        The manifest's ``training_data`` (instead of one described from ``train_data``) and
        ``source_metrics``, as ``onboard`` writes them
        (:func:`~recsys_router.export.provenance.onboarded_fields`); checked as a loader
        checks them before anything is written.

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
    check_policy(policy, policy_value)
    key = key_bytes(sign_key)
    out = check_export_target(out, overwrite)
    try:
        doc, arrays = router_to_state(router)
    except StateError as exc:
        raise ArtifactError(f"{type(router).__name__} cannot be exported: {exc}") from exc
    from .. import __version__
    score_range = answer_score_range(router, train_data)  # the router's, else the data's
    manifest = {
        "format": "recsys-router-artifact", "format_version": FORMAT_VERSION,
        "package_version": __version__, "router_class": doc["class"],
        "router_params": doc["params"],
        "llms": _pool(router, train_data.llms if train_data is not None else llms),
        "encoder": _encoder_info(router), "uses_text": bool(router.uses_text),
        "uses_ground_truth": bool(router.uses_ground_truth),
        "uses_tasks": router_uses_tasks(router),
        "default_policy": {"name": policy, "value": policy_value},
        "training_data": training_info if training_info is not None else (
            None if train_data is None else {
                "name": train_data.name, "fingerprint": data_fingerprint(train_data),
                "n_queries": train_data.n_queries, "n_llms": train_data.n_llms}),
        "metrics": {k: (float(v) if v is not None and np.isfinite(float(v)) else None)
                    for k, v in (metrics or {}).items()},
        "score_range": None if score_range is None else list(score_range),
        "arrays": {k: {"dtype": v.dtype.name, "shape": list(v.shape)} for k, v in arrays.items()},
    }
    if source_metrics is not None:  # onboarded artifacts only: plain exports stay as they were
        manifest["source_metrics"] = source_metrics
    try:  # never write what the loader would refuse
        check_onboard_fields(manifest)
    except StateError as exc:
        raise ArtifactError(f"{out / 'manifest.json'}: {exc}") from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    # mkdir's permissions (not mkdtemp's owner-only ones): a service running as another user
    # reads the artifact like its files
    tmp = temp_dir(out.parent, f".{out.name}.tmp-{os.getpid()}-")
    try:
        _write_json(tmp / "state.json", doc)
        with open(tmp / "weights.npz", "wb") as fh:
            np.savez(fh, **arrays)
        # files this call just wrote: no cap beyond what the file system holds
        manifest["files"] = {f: sha256_file(tmp / f, max_bytes=1 << 62) for f in _FILES}
        if key is not None:
            manifest["signature"] = {"alg": "hmac-sha256", "value": signature(manifest, key)}
        _write_json(tmp / "manifest.json", manifest)
        replace_dir(tmp, out)  # a failed swap puts the previous artifact back
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def load_router(path: str | os.PathLike, *, sign_key: str | bytes | None = None,
                max_bytes: int | None = None) -> ExportedRouter:
    """Load and verify an artifact directory written by :func:`export_router`.

    Parameters
    ----------
    path : path
        The artifact directory.
    sign_key : str or bytes, optional
        Require a valid HMAC-SHA256 signature made with this key.
    max_bytes : int, optional
        Cap on the total size of the arrays (default ``LIMITS["max_array_bytes"]``).

    Raises
    ------
    ArtifactError
        Missing, other-version, tampered, unsafe or incomplete artifacts (one line naming
        the file and field).

    Example
    -------
    >>> r = load_router("out/knn")                       # doctest: +SKIP
    >>> r.route(["What is 2+2?"], wtp=100.0)[0]["llm"]   # doctest: +SKIP
    """
    path = Path(path)
    clean_stale(path)
    manifest = check_listing(path, sign_key=sign_key)
    if manifest["router_class"] not in class_table():
        raise ArtifactError(f"{path / 'manifest.json'}: router_class "
                            f"{manifest['router_class'][:120]!r} is not a registered router class; "
                            "an artifact may only name one of the classes in the router registry")
    cap = int(LIMITS["max_array_bytes"] if max_bytes is None else max_bytes)
    declared = declared_arrays(manifest, path / "manifest.json", cap)
    sp, wp = path / "state.json", path / "weights.npz"
    # each file is read once: its checksum (and so the signature) covers exactly the bytes
    # parsed below, whatever happens to the file on disk meanwhile
    state_raw = read_verified(path, manifest, "state.json", LIMITS["state_bytes"])
    weights_raw = read_verified(path, manifest, "weights.npz", _npz_bytes(declared))
    try:
        doc = parse_json(state_raw, sp, max_depth=LIMITS["json_depth"],
                         max_items=LIMITS["state_items"])
        if not isinstance(doc, dict) or doc.get("class") != manifest["router_class"]:
            raise ArtifactError(f"{sp}: its class does not match the manifest's router_class")
        with NpzReader(wp, data=weights_raw) as npz:
            if set(npz.names) != set(declared):
                diff = sorted(set(npz.names) ^ set(declared))
                raise ArtifactError(f"{wp}: arrays {diff[:5]} differ from the manifest's list")
            for name, (dtype, shape) in declared.items():
                if npz.header(name)[:2] != (dtype, shape):
                    raise ArtifactError(f"{wp}: array {name!r} is {npz.header(name)[:2]}, the "
                                        f"manifest declares {(dtype, shape)}")
            arrays = {n: npz.read(n, cap) for n in declared}
    except (LimitError, StateError) as exc:
        raise ArtifactError(str(exc)) from exc
    del weights_raw
    try:
        router = router_from_state(doc, arrays, str(sp), declared)
    except (StateError, ValueError, TypeError, KeyError, IndexError, RuntimeError,
            OverflowError) as exc:
        raise ArtifactError(f"{sp}: cannot rebuild the router: {exc}") from exc
    if [r.get("name") for r in manifest["llms"]] != list(router.llm_names_):
        raise ArtifactError(f"{path / 'manifest.json'}: llms do not match the state's LLM pool")
    try:
        check_onboarded_origin(manifest, getattr(router, "llm_info_", None))
    except StateError as exc:
        raise ArtifactError(f"{path / 'manifest.json'}: {exc}") from exc
    own, recorded = getattr(router, "score_range_", None), manifest.get("score_range")
    if own is not None and recorded is not None \
            and [float(x) for x in own] != [float(x) for x in recorded]:
        # both written from the same fitted range: a difference is an edited file
        raise ArtifactError(f"{sp}: score_range_ {[float(x) for x in own]} differs from the "
                            f"manifest's score_range {[float(x) for x in recorded]}")
    warn_other_encoder(manifest, router, path)
    if own is None and recorded is not None:
        # the scale add_llm (onboard, POST /llms) holds a new LLM's probe scores to
        router.score_range_ = tuple(float(x) for x in manifest["score_range"])
    exported = ExportedRouter(router, manifest, path)
    if exported.uses_tasks:
        warnings.warn(TASKS_WARNING.format(cls=manifest["router_class"]), UserWarning,
                      stacklevel=2)
    return exported


def set_default_policy(path: str | os.PathLike, policy: str, value: float | None,
                       extra: dict | None = None, *, sign_key: str | bytes | None = None) -> dict:
    """Rewrite the artifact's default policy (manifest only, replaced atomically). A signed
    artifact needs its key, and is signed again."""
    path = Path(path)
    manifest = verify_artifact(path, sign_key=sign_key)
    if manifest.get("signature") and sign_key is None:
        raise ArtifactError(f"{path}/manifest.json is signed: pass the signing key to change it")
    check_policy(policy, value)
    manifest["default_policy"] = {"name": policy, "value": value, **(extra or {})}
    manifest.pop("signature", None)
    key = key_bytes(sign_key)
    if key is not None:
        manifest["signature"] = {"alg": "hmac-sha256", "value": signature(manifest, key)}
    # a new file (the umask's permissions, not mkstemp's owner-only ones), named so that
    # clean_stale removes it if this process dies before the rename
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(8)}"
    try:
        _write_json(tmp, manifest)
        os.replace(tmp, path / "manifest.json")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return manifest
