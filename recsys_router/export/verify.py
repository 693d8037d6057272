"""Verification of format-2 artifacts: directory listing, manifest types, format version,
optional HMAC-SHA256 signature, file checksums and declared array sizes (no array is read).

Example
-------
>>> verify_artifact("out/knn")["format_version"]  # doctest: +SKIP
2
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

import numpy as np

from ..state import (ARRAY_DTYPES, BOOL, FLOAT, INT, JSON_ANY, NAME_RE, STR, DictOf, ListOf, Opt,
                     StateError, TupleOf, check_state, check_value, describe, is_json_number)
from .provenance import check_onboard_fields
from .safe_io import (MAX_DIM, LimitError, non_native, read_bytes, read_json, sha256_file,
                      shape_span)

__all__ = ["FORMAT_VERSION", "LIMITS", "ArtifactError", "verify_artifact", "check_listing",
           "read_verified", "check_policy", "declared_arrays", "signature", "key_bytes"]

FORMAT_VERSION = 2
_FILES = ("state.json", "weights.npz")
#: caps on what a loader reads (bytes, nesting depth, state.json items: the ``{ [ , :``
#: outside strings, each of which can cost a Python object); ``max_array_bytes`` is the
#: default total of all arrays, overridable per call. Every large array is in weights.npz:
#: state.json holds names and small records. The largest genuine one measured (a safe-fallback
#: MF over 8,500 LLMs with 200-character names, 500 of them onboarded) is 5.8 MB with 41,500
#: items, twice its manifest, whose 4 MiB cap bounds the pool's names. A hostile file within
#: 16 MiB and 500,000 items peaked at 131 MB (one non-BMP character: 8x) or 59 MB (distinct keys)
LIMITS = {"manifest_bytes": 4 << 20, "state_bytes": 16 << 20, "json_depth": 64,
          "state_items": 500_000, "max_array_bytes": 4 << 30}
_REEXPORT = ("re-export it with this version from its training data, e.g. "
             "`recsys-router export --router NAME --data DATA --out DIR`")


class ArtifactError(ValueError):
    """An artifact is missing, incomplete, tampered with, unsafe, or of another format.

    The message is one line naming the file (and field)."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def key_bytes(key) -> bytes | None:
    """A signing key as bytes (None stays None; an empty key is an error)."""
    if key is None:
        return None
    key = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    if not key:
        raise ArtifactError("the signing key is empty")
    return key


def signature(manifest: dict, key: bytes) -> str:
    """HMAC-SHA256 (hex) of the manifest without its ``signature`` field, as canonical JSON
    (sorted keys, no spaces, ASCII)."""
    body = {k: v for k, v in manifest.items() if k != "signature"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(key, text.encode("ascii"), hashlib.sha256).hexdigest()


def check_policy(policy, value) -> None:
    """Refuse an unknown default policy, or a wtp/budget policy without a finite value >= 0."""
    if policy not in ("argmax", "wtp", "budget"):
        raise ArtifactError(f"unknown policy {policy!r}; expected argmax, wtp or budget")
    if policy != "argmax" and (not is_json_number(value) or value < 0):
        raise ArtifactError(f"policy {policy!r} needs a finite value >= 0, got {describe(value)}")


#: dtype spellings a manifest may declare: the allowed names and their one-letter codes
#: (``float64``, ``f8``...), never a sub-array, structured or object dtype
_DTYPE_CODES = frozenset(ARRAY_DTYPES) | {np.dtype(n).str[1:] for n in ARRAY_DTYPES} | \
    {np.dtype(n).char for n in ARRAY_DTYPES}
_ARRAY = DictOf(JSON_ANY)
_MANIFEST = {
    "format": STR, "format_version": INT, "package_version": STR, "router_class": STR,
    "router_params": DictOf(JSON_ANY, 1000), "llms": ListOf(DictOf(JSON_ANY, 20), 100_000),
    "encoder": Opt(DictOf(JSON_ANY, 20)), "uses_text": BOOL, "uses_ground_truth": BOOL,
    "default_policy": DictOf(JSON_ANY, 20), "training_data": Opt(DictOf(JSON_ANY, 20)),
    "metrics": DictOf(Opt(FLOAT), 10_000), "arrays": DictOf(_ARRAY, 10_000),
    "files": DictOf(STR, 10), "signature": Opt(DictOf(STR, 4)),
    # lowest and highest training score (the scale add_llm holds probe scores to); optional:
    # artifacts written before it have none
    "score_range": Opt(TupleOf(FLOAT, FLOAT)),
    # whether routing reads each query's task label; optional: older artifacts have none
    "uses_tasks": Opt(BOOL),
    # onboarded artifacts only: the metrics of the router they were onboarded from, checked
    # with training_data.onboarded by provenance.check_onboard_fields
    "source_metrics": Opt(DictOf(JSON_ANY, 10)),
}


def _read_manifest(path: Path) -> dict:
    mf = path / "manifest.json"
    if not path.is_dir():
        raise ArtifactError(f"{path}: not an artifact directory (it does not exist)")
    if not mf.exists() and not mf.is_symlink():
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
                    {"signature": None, "score_range": None, "source_metrics": None, "uses_tasks": None,
                     **manifest}, {})
        rng = manifest.get("score_range")
        if rng is not None and not float(rng[0]) <= float(rng[1]):
            raise StateError(f"score_range: expected [lowest, highest], got {rng}")
        bad = [n for n in manifest["arrays"] if not NAME_RE.match(n) or ".." in n]
        if bad:
            raise StateError(f"arrays: name {bad[0][:80]!r} is not allowed")
        check_value(ListOf(STR), [r.get("name") for r in manifest["llms"]], "llms[].name")
        check_onboard_fields(manifest)
        dp = manifest["default_policy"]
        check_policy(dp.get("name"), dp.get("value"))
    except (StateError, ArtifactError) as exc:
        raise ArtifactError(f"{mf}: {exc}") from exc
    return manifest


def check_listing(path: str | os.PathLike, *, sign_key: str | bytes | None = None) -> dict:
    """Check the directory listing, the manifest, its format version and its signature (when
    a key is given), and that it lists exactly the artifact's files; return the manifest.
    The files themselves are checked by :func:`verify_artifact` or :func:`read_verified`."""
    path = Path(path)
    manifest = _read_manifest(path)
    mf = path / "manifest.json"
    names = {p.name for p in path.iterdir()}
    extra = sorted(names - {"manifest.json", *_FILES})
    if extra:
        raise ArtifactError(f"{path}: unexpected file(s) {extra[:5]} in the artifact")
    key = key_bytes(sign_key)
    if key is not None:
        sig = manifest.get("signature")
        if not sig or sig.get("alg") != "hmac-sha256":
            raise ArtifactError(f"{mf}: not signed (export it with a signing key)")
        if not hmac.compare_digest(str(sig.get("value", "")), signature(manifest, key)):
            raise ArtifactError(f"{mf}: signature mismatch (wrong key, or the manifest was modified)")
    files = manifest["files"]
    if set(files) != set(_FILES):
        raise ArtifactError(f"{mf}: files must list exactly {list(_FILES)}, got {sorted(files)[:5]}")
    return manifest


def _check_file(p: Path) -> None:
    if not p.exists() and not p.is_symlink():
        raise ArtifactError(f"{p.parent}: incomplete artifact, {p.name} is missing")
    if p.is_symlink() or not p.is_file():
        raise ArtifactError(f"{p}: not a regular file")


def read_verified(path: Path, manifest: dict, name: str, max_bytes: int) -> bytes:
    """The bytes of one artifact file, read once and checked against the manifest's
    checksum: the caller parses exactly the bytes that were checked, so a file replaced
    after the check cannot be loaded under a valid checksum or signature."""
    p = Path(path) / name
    _check_file(p)
    try:
        raw = read_bytes(p, max_bytes=max_bytes)
    except LimitError as exc:
        raise ArtifactError(str(exc)) from exc
    if hashlib.sha256(raw).hexdigest() != manifest["files"][name]:
        raise ArtifactError(f"{p}: checksum mismatch (the file was modified or corrupted)")
    return raw


def verify_artifact(path: str | os.PathLike, *, sign_key: str | bytes | None = None) -> dict:
    """Check the directory listing, format version, signature (when a key is given) and
    every file's checksum; return the manifest.

    Loading does not use this result to read the files afterwards: :func:`load_router`
    checks and parses the same bytes (:func:`read_verified`)."""
    path = Path(path)
    manifest = check_listing(path, sign_key=sign_key)
    caps = {"state.json": LIMITS["state_bytes"], "weights.npz": LIMITS["max_array_bytes"] * 2}
    for f in _FILES:
        p = path / f
        _check_file(p)
        try:
            digest = sha256_file(p, max_bytes=caps[f])
        except LimitError as exc:
            raise ArtifactError(str(exc)) from exc
        if digest != manifest["files"][f]:
            raise ArtifactError(f"{p}: checksum mismatch (the file was modified or corrupted)")
    return manifest


def declared_arrays(manifest: dict, mf: Path, max_bytes: int) -> dict:
    out, total = {}, 0
    for name, spec in manifest["arrays"].items():
        raw = spec.get("dtype")
        if not isinstance(raw, str) or (raw[1:] if raw[:1] in "<>=|" else raw) not in _DTYPE_CODES:
            raise ArtifactError(f"{mf}: arrays.{name}.dtype: {str(raw)[:40]!r} is not one of the "
                                f"allowed dtypes {sorted(ARRAY_DTYPES)}")
        dtype = np.dtype(raw)
        if not dtype.isnative:
            raise ArtifactError(f"{mf}: arrays.{name}.dtype: {raw!r} is {non_native(dtype)}")
        shape = spec.get("shape")
        if set(spec) != {"dtype", "shape"} or not isinstance(shape, list) or len(shape) > 8 or \
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ArtifactError(f"{mf}: arrays.{name}: expected dtype and a list of sizes")
        if any(d > MAX_DIM for d in shape):
            raise ArtifactError(f"{mf}: arrays.{name}.shape: a size over 2**62 (no machine holds "
                                "such an array)")
        if shape_span(shape, dtype.itemsize) > MAX_DIM:
            raise ArtifactError(f"{mf}: arrays.{name}.shape: {shape}: its sizes other than 0 times "
                                f"the {dtype.itemsize}-byte item exceed 2**62 (numpy cannot index "
                                "it, even empty)")
        total += int(np.prod(shape, dtype=object)) * dtype.itemsize
        out[name] = (dtype, tuple(shape))
    if total > max_bytes:
        raise ArtifactError(f"{mf}: arrays total {total:,} bytes, more than the {max_bytes:,} "
                            "allowed (raise max_bytes to load it)")
    return out
