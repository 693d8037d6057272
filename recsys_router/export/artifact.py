"""Router artifacts, format 2: data only by construction. Write (atomically), verify, load.

An artifact is a directory holding exactly three files::

    manifest.json   format version, router class (an exact registered name) and parameters,
                    LLM pool (names, prices, mean costs), encoder identity, default policy,
                    training-data fingerprint, metrics, package version, the dtype and shape
                    of every array, the SHA-256 of the two other files and, optionally, an
                    HMAC-SHA256 signature of the manifest itself
    state.json      the router's declared fitted state (``Router._get_state``): JSON only
    weights.npz     the declared arrays, uncompressed, numeric dtypes only

Loading never imports a name or runs code that the files choose: the router class comes
from an explicit table of registered classes, the state is validated against the class's
declared spec (types, dtypes, shapes) before the class's own ``_from_state`` rebuilds it,
and every read is bounded (JSON size and depth, array sizes checked against the manifest
before allocation, a total-size cap). Every failure is an :class:`ArtifactError` naming
the file and field.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..router import Router
from ..state import (BOOL, FLOAT, INT, JSON_ANY, NAME_RE, STR, DictOf, ListOf, Opt, StateError,
                     check_state, check_value, json_safe)
from .exported import ExportedRouter
from .safe_io import LimitError, NpzReader, read_json
from ..router_state import class_table, router_from_state, router_to_state

__all__ = ["FORMAT_VERSION", "ArtifactError", "export_router", "load_router", "ExportedRouter",
           "verify_artifact", "data_fingerprint", "set_default_policy", "LIMITS"]

FORMAT_VERSION = 2
_FILES = ("state.json", "weights.npz")
#: caps on what a loader reads (bytes, nesting depth); ``max_array_bytes`` is the default
#: total of all arrays, overridable per call
LIMITS = {"manifest_bytes": 4 << 20, "state_bytes": 256 << 20, "json_depth": 64,
          "max_array_bytes": 4 << 30}
_TMP = re.compile(r"^\.(?P<name>.+)\.(?:tmp|old)-(?P<pid>\d+)-[A-Za-z0-9_]+$")
_REEXPORT = ("re-export it with this version from its training data, e.g. "
             "`recsys-router export --router NAME --data DATA --out DIR`")


class ArtifactError(ValueError):
    """An artifact is missing, incomplete, tampered with, unsafe, or of another format.

    The message is one line naming the file (and field)."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


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


def _key_bytes(key) -> bytes | None:
    if key is None:
        return None
    key = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    if not key:
        raise ArtifactError("the signing key is empty")
    return key


def _signature(manifest: dict, key: bytes) -> str:
    body = {k: v for k, v in manifest.items() if k != "signature"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(key, text.encode("ascii"), hashlib.sha256).hexdigest()


def _write_json(path: Path, obj) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, allow_nan=False)
        fh.write("\n")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def clean_stale(out: Path) -> list[Path]:
    """Remove the temporary siblings (``.NAME.tmp-PID-*``, ``.NAME.old-PID-*``) that an
    export of ``out`` killed mid-way left behind (their process is gone)."""
    removed = []
    parent = out.parent
    if not parent.is_dir():
        return removed
    for p in parent.iterdir():
        m = _TMP.match(p.name)
        if m and m["name"] == out.name and not _pid_alive(int(m["pid"])) and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            removed.append(p)
    return removed


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
    if enc is not None and hasattr(enc, "identity"):
        return {"identity": str(enc.identity), "dim": int(enc.dim)}
    name = getattr(router, "encoder", None)
    return {"identity": str(name), "dim": None} if name is not None else None


def export_router(router: Router, out: str | os.PathLike, *, train_data: RoutingData | None = None,
                  metrics: dict | None = None, llms: pd.DataFrame | None = None,
                  policy: str = "argmax", policy_value: float | None = None,
                  overwrite: bool = False, sign_key: str | bytes | None = None) -> Path:
    """Write a fitted router as a format-2 artifact directory.

    The directory is assembled in a temporary sibling (``.NAME.tmp-PID-*``) and renamed
    into place at the end; a sibling left by a killed export is removed by the next
    export or load of the same target.

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
        Replace an existing directory.
    sign_key : str or bytes, optional
        Write an HMAC-SHA256 of the manifest (checked by ``load_router(sign_key=...)``).

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
    key = _key_bytes(sign_key)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ArtifactError(f"{out} exists and is not a directory")
    if out.exists() and not overwrite:
        raise ArtifactError(f"{out} already exists; pass overwrite=True (CLI: --overwrite)")
    try:
        doc, arrays = router_to_state(router)
    except StateError as exc:
        raise ArtifactError(f"{type(router).__name__} cannot be exported: {exc}") from exc
    from .. import __version__
    manifest = {
        "format": "recsys-router-artifact", "format_version": FORMAT_VERSION,
        "package_version": __version__, "router_class": doc["class"],
        "router_params": doc["params"],
        "llms": _pool(router, train_data.llms if train_data is not None else llms),
        "encoder": _encoder_info(router), "uses_text": bool(router.uses_text),
        "uses_ground_truth": bool(router.uses_ground_truth),
        "default_policy": {"name": policy, "value": policy_value},
        "training_data": None if train_data is None else {
            "name": train_data.name, "fingerprint": data_fingerprint(train_data),
            "n_queries": train_data.n_queries, "n_llms": train_data.n_llms},
        "metrics": {k: (float(v) if v is not None and np.isfinite(float(v)) else None)
                    for k, v in (metrics or {}).items()},
        "arrays": {k: {"dtype": v.dtype.name, "shape": list(v.shape)} for k, v in arrays.items()},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    try:
        _write_json(tmp / "state.json", doc)
        with open(tmp / "weights.npz", "wb") as fh:
            np.savez(fh, **arrays)
        manifest["files"] = {f: _sha256(tmp / f) for f in _FILES}
        if key is not None:
            manifest["signature"] = {"alg": "hmac-sha256", "value": _signature(manifest, key)}
        _write_json(tmp / "manifest.json", manifest)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-{os.getpid()}-", dir=out.parent))
            os.replace(out, old / "a")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _check_policy(policy, value) -> None:
    if policy not in ("argmax", "wtp", "budget"):
        raise ArtifactError(f"unknown policy {policy!r}; expected argmax, wtp or budget")
    if policy != "argmax" and (isinstance(value, bool) or not isinstance(value, (int, float))
                               or not np.isfinite(value) or value < 0):
        raise ArtifactError(f"policy {policy!r} needs a finite value >= 0, got {value!r}")


_ARRAY = DictOf(JSON_ANY)
_MANIFEST = {
    "format": STR, "format_version": INT, "package_version": STR, "router_class": STR,
    "router_params": DictOf(JSON_ANY, 1000), "llms": ListOf(DictOf(JSON_ANY, 20), 100_000),
    "encoder": Opt(DictOf(JSON_ANY, 20)), "uses_text": BOOL, "uses_ground_truth": BOOL,
    "default_policy": DictOf(JSON_ANY, 20), "training_data": Opt(DictOf(JSON_ANY, 20)),
    "metrics": DictOf(Opt(FLOAT), 10_000), "arrays": DictOf(_ARRAY, 10_000),
    "files": DictOf(STR, 10), "signature": Opt(DictOf(STR, 4)),
}


def _read_manifest(path: Path) -> dict:
    mf = path / "manifest.json"
    if not path.is_dir():
        raise ArtifactError(f"{path}: not an artifact directory (it does not exist)")
    if not mf.exists():
        raise ArtifactError(f"{path}: incomplete artifact, manifest.json is missing")
    try:
        manifest = read_json(mf, max_bytes=LIMITS["manifest_bytes"], max_depth=16)
    except LimitError as exc:
        raise ArtifactError(str(exc)) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != "recsys-router-artifact":
        raise ArtifactError(f"{mf}: not a recsys-router artifact manifest (expected a JSON "
                            "object with format 'recsys-router-artifact')")
    version = manifest.get("format_version")
    if version == 1:
        raise ArtifactError(f"{mf}: format 1 artifacts rebuild arbitrary objects and are no "
                            f"longer loaded; {_REEXPORT}")
    if version != FORMAT_VERSION:
        raise ArtifactError(f"{mf}: format_version {version!r} is not supported (this package "
                            f"reads version {FORMAT_VERSION}); {_REEXPORT}")
    try:
        check_state({**_MANIFEST, "signature": Opt(DictOf(STR, 4))},
                    {"signature": None, **manifest}, {})
        bad = [n for n in manifest["arrays"] if not NAME_RE.match(n) or ".." in n]
        if bad:
            raise StateError(f"arrays: name {bad[0][:80]!r} is not allowed")
        check_value(ListOf(STR), [r.get("name") for r in manifest["llms"]], "llms[].name")
        dp = manifest["default_policy"]
        _check_policy(dp.get("name"), dp.get("value"))
    except (StateError, ArtifactError) as exc:
        raise ArtifactError(f"{mf}: {exc}") from exc
    return manifest


def verify_artifact(path: str | os.PathLike, *, sign_key: str | bytes | None = None) -> dict:
    """Check the directory listing, format version, signature (when a key is given) and
    every file's checksum; return the manifest."""
    path = Path(path)
    manifest = _read_manifest(path)
    mf = path / "manifest.json"
    names = {p.name for p in path.iterdir()}
    extra = sorted(names - {"manifest.json", *_FILES})
    if extra:
        raise ArtifactError(f"{path}: unexpected file(s) {extra[:5]} in the artifact")
    key = _key_bytes(sign_key)
    if key is not None:
        sig = manifest.get("signature")
        if not sig or sig.get("alg") != "hmac-sha256":
            raise ArtifactError(f"{mf}: not signed (export it with a signing key)")
        if not hmac.compare_digest(str(sig.get("value", "")), _signature(manifest, key)):
            raise ArtifactError(f"{mf}: signature mismatch (wrong key, or the manifest was modified)")
    files = manifest["files"]
    if set(files) != set(_FILES):
        raise ArtifactError(f"{mf}: files must list exactly {list(_FILES)}, got {sorted(files)[:5]}")
    caps = {"state.json": LIMITS["state_bytes"], "weights.npz": LIMITS["max_array_bytes"] * 2}
    for f in _FILES:
        p = path / f
        if not p.exists():
            raise ArtifactError(f"{path}: incomplete artifact, {f} is missing")
        if p.is_symlink() or not p.is_file():
            raise ArtifactError(f"{p}: not a regular file")
        if p.stat().st_size > caps[f]:
            raise ArtifactError(f"{p}: {p.stat().st_size:,} bytes, more than the {caps[f]:,} allowed")
        if _sha256(p) != files[f]:
            raise ArtifactError(f"{p}: checksum mismatch (the file was modified or corrupted)")
    return manifest


def _declared_arrays(manifest: dict, mf: Path, max_bytes: int) -> dict:
    out, total = {}, 0
    for name, spec in manifest["arrays"].items():
        try:
            dtype = np.dtype(spec.get("dtype")) if isinstance(spec.get("dtype"), str) else None
        except TypeError:
            dtype = None
        shape = spec.get("shape")
        if dtype is None or set(spec) != {"dtype", "shape"} or not isinstance(shape, list) or \
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ArtifactError(f"{mf}: arrays.{name}: expected dtype and a list of sizes")
        total += int(np.prod(shape, dtype=object)) * dtype.itemsize
        out[name] = (dtype, tuple(shape))
    if total > max_bytes:
        raise ArtifactError(f"{mf}: arrays total {total:,} bytes, more than the {max_bytes:,} "
                            "allowed (raise max_bytes to load it)")
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
    manifest = verify_artifact(path, sign_key=sign_key)
    if manifest["router_class"] not in class_table():
        raise ArtifactError(f"{path / 'manifest.json'}: router_class "
                            f"{manifest['router_class'][:120]!r} is not a registered router class; "
                            "an artifact may only name one of the classes in the router registry")
    cap = int(LIMITS["max_array_bytes"] if max_bytes is None else max_bytes)
    declared = _declared_arrays(manifest, path / "manifest.json", cap)
    sp, wp = path / "state.json", path / "weights.npz"
    try:
        doc = read_json(sp, max_bytes=LIMITS["state_bytes"], max_depth=LIMITS["json_depth"])
        if not isinstance(doc, dict) or doc.get("class") != manifest["router_class"]:
            raise ArtifactError(f"{sp}: its class does not match the manifest's router_class")
        with NpzReader(wp) as npz:
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
    try:
        router = router_from_state(doc, arrays, str(sp), declared)
    except (StateError, ValueError, TypeError, KeyError, IndexError, RuntimeError) as exc:
        raise ArtifactError(f"{sp}: cannot rebuild the router: {exc}") from exc
    if [r.get("name") for r in manifest["llms"]] != list(router.llm_names_):
        raise ArtifactError(f"{path / 'manifest.json'}: llms do not match the state's LLM pool")
    return ExportedRouter(router, manifest, path)


def set_default_policy(path: str | os.PathLike, policy: str, value: float | None,
                       extra: dict | None = None, *, sign_key: str | bytes | None = None) -> dict:
    """Rewrite the artifact's default policy (manifest only, replaced atomically). A signed
    artifact needs its key, and is signed again."""
    path = Path(path)
    manifest = verify_artifact(path, sign_key=sign_key)
    if manifest.get("signature") and sign_key is None:
        raise ArtifactError(f"{path}/manifest.json is signed: pass the signing key to change it")
    _check_policy(policy, value)
    manifest["default_policy"] = {"name": policy, "value": value, **(extra or {})}
    manifest.pop("signature", None)
    key = _key_bytes(sign_key)
    if key is not None:
        manifest["signature"] = {"alg": "hmac-sha256", "value": _signature(manifest, key)}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-{os.getpid()}-", dir=path.parent)
    os.close(fd)
    try:
        _write_json(Path(tmp), manifest)
        os.replace(tmp, path / "manifest.json")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return manifest
