"""Onboarding a new LLM into an exported artifact (library side of ``recsys-router onboard``)."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

import numpy as np
import pandas as pd

from recsys_router.data import RoutingData
from recsys_router.datasets._common import read_csv
from recsys_router.datasets._rows import CsvLines
from recsys_router.errors import DataValidationError
from recsys_router.long_columns import F32_MAX

from .pool import (UNKNOWN_RANGE_SCALE, answer_score_range, observed_range, outside_range,
                   scale_text)

__all__ = ["read_answers", "answer_score_range", "onboard_artifact", "MAX_ANSWER_BYTES",
           "pool_table", "resolve_score_range", "answers_sha256", "ANSWER_COLUMNS"]

#: largest answers file read (bytes)
MAX_ANSWER_BYTES = 50_000_000
#: the columns an answers file may have (``probes --out`` writes query_id, text, task, weight)
ANSWER_COLUMNS = ("query_id", "text", "task", "score", "cost", "weight")


def read_answers(path, name: str, data: RoutingData | None = None, score_range=None, *,
                 scale_note: str = "") -> tuple[RoutingData, np.ndarray | None]:
    """Probe records of LLM ``name`` from a CSV (``query_id`` and/or ``text``, ``score``,
    optional ``cost`` and ``weight``); texts missing from the file are taken from ``data`` by
    ``query_id``. The ``weight`` column is the one ``recsys-router probes`` writes (how many
    candidate queries each probe stands for), so its output with a ``score`` column added is
    a valid answers file.

    Parameters
    ----------
    path : str or Path
    name : str
        The new LLM.
    data : RoutingData, optional
        The queries, to look texts up by ``query_id``.
    score_range : (float, float), optional
        Lowest and highest of the router's training scores (see :func:`answer_score_range`);
        a score off the scale derived from it
        (:func:`~recsys_router.coldstart.pool.score_scale`) is refused (None: unchecked).
    scale_note : str
        Appended to that error (e.g. why the scale is the one assumed).

    Returns
    -------
    (RoutingData, ndarray or None)
        The probes and their weights (None without a ``weight`` column).

    Raises
    ------
    ValueError
        ``name`` is no valid LLM name (checked before the file is read).
    DataValidationError
        Naming the file, row (file line) and column (unknown query, empty or repeated
        query_id, a probe text given twice, blank or over
        :data:`~recsys_router.coldstart.probes_input.MAX_TEXT_LENGTH` characters,
        missing/NaN score, cost or weight, a score or cost beyond float32, a score outside
        ``score_range``, negative cost or weight, no text); naming the file and the column
        for a column outside :data:`ANSWER_COLUMNS` (a misspelt ``wieght`` would otherwise
        be ignored); naming the file when it holds no records or more than
        :data:`~recsys_router.coldstart.probes_input.MAX_PROBES`.
    """
    from .probes_input import MAX_PROBES, check_llm_name, probe_data
    name = check_llm_name(name)   # an option's fault, never blamed on the file
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: answers file not found")
    if path.stat().st_size > MAX_ANSWER_BYTES:
        raise DataValidationError(f"file is {path.stat().st_size} bytes; at most {MAX_ANSWER_BYTES}",
                                  source=str(path))
    # the loaders' reader: a record with an extra field, a header naming a column twice or
    # text that is not UTF-8 is an error naming the line (pandas would shift the columns)
    df = read_csv(path, dtype={"query_id": str, "text": str}, keep_default_na=False,
                  na_values=[""])
    line = CsvLines(path).field_line  # record index, column -> file line (error path only)
    if df.empty:
        raise DataValidationError("no probe records (at most a header line); expected one record "
                                  "per probe", source=str(path))
    extra = [str(c)[:100] for c in df.columns if c not in ANSWER_COLUMNS]
    if extra:
        raise DataValidationError(f"unknown column {extra[0]!r} in the header; expected only "
                                  f"{', '.join(ANSWER_COLUMNS)} (a misspelt column would be "
                                  "ignored)", source=str(path), column=extra[0])
    if len(df) > MAX_PROBES:
        raise DataValidationError(f"{len(df)} probe records; at most {MAX_PROBES} allowed",
                                  source=str(path))
    if "score" not in df.columns or not ({"query_id", "text"} & set(df.columns)):
        raise DataValidationError("expected columns 'score' and 'query_id' and/or 'text'",
                                  source=str(path))
    ids_given = "query_id" in df.columns
    if not ids_given:
        df["query_id"] = [f"probe-{i}" for i in range(len(df))]
    empty = (df["query_id"].isna() | (df["query_id"].astype(str).str.strip() == "")).to_numpy()
    if empty.any():
        i = int(np.flatnonzero(empty)[0])
        raise DataValidationError(f"empty query_id {df['query_id'].iloc[i]!r}; expected a "
                                  f"non-empty id (or leave the column out)", source=str(path),
                                  row=line(i, "query_id"), column="query_id")
    for col in ("score", "cost", "weight"):
        if col in df.columns:
            v = pd.to_numeric(df[col], errors="coerce")
            bad = v.isna().to_numpy() | ~np.isfinite(v.fillna(0).to_numpy())
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raw = df[col].iloc[i]   # a text cell quoted, a number as written (nan, inf)
                shown = repr(raw) if isinstance(raw, str) else str(raw)
                raise DataValidationError(f"{col} {shown} is not a finite number",
                                          source=str(path), row=line(i, col), column=col)
            if col != "weight" and (v.abs() > F32_MAX).any():   # stored as float32
                i = int(np.flatnonzero((v.abs() > F32_MAX).to_numpy())[0])
                raise DataValidationError(f"{col} {df[col].iloc[i]} is beyond the float32 range "
                                          f"(|x| <= {F32_MAX:.4g}) the probes are stored in",
                                          source=str(path), row=line(i, col), column=col)
            if col in ("cost", "weight") and (v < 0).any():
                i = int(np.flatnonzero((v < 0).to_numpy())[0])
                raise DataValidationError(f"{col} {v.iloc[i]} is negative; expected a {col} >= 0",
                                          source=str(path), row=line(i, col), column=col)
            far = outside_range(v.to_numpy(), score_range) if col == "score" else []
            if len(far):
                i = int(far[0])
                raise DataValidationError(
                    f"score {v.iloc[i]} is off the pool's score scale {scale_text(score_range)}"
                    + (f": {scale_note}" if scale_note else ""),
                    source=str(path), row=line(i, col), column=col)
            df[col] = v
    if "text" in df.columns:  # an empty cell is a missing text; only spaces is a bad one
        blank = (df["text"].notna() & (df["text"].astype(str).str.strip() == "")).to_numpy()
        if blank.any():
            i = int(np.flatnonzero(blank)[0])
            raise DataValidationError(
                f"text {df['text'].iloc[i]!r} is blank; expected the probe's query text"
                + (" (or an empty cell, to take it from --data by query_id)" if ids_given else ""),
                source=str(path), row=line(i, "text"), column="text")
    text_given = df["text"].notna().to_numpy() if "text" in df.columns else np.zeros(len(df), bool)
    if "text" not in df.columns or df["text"].isna().any():
        if data is None:
            raise DataValidationError("rows without 'text' need --data to look the query up by "
                                      "query_id", source=str(path), column="text")
        lookup = dict(zip(data.query_ids, data.texts))
        unknown = ~df["query_id"].isin(lookup)
        if unknown.any():
            i = int(np.flatnonzero(unknown.to_numpy())[0])
            raise DataValidationError(f"unknown query {df['query_id'].iloc[i]!r} (not in --data)",
                                      source=str(path), row=line(i, "query_id"), column="query_id")
        texts = df["query_id"].map(lookup)
        df["text"] = df["text"].fillna(texts) if "text" in df.columns else texts
    _check_text_lengths(df, text_given, path, line)
    q = df[["query_id", "text"]].reset_index(drop=True)
    scores = df[["score"]].to_numpy(np.float64)
    costs = df[["cost"]].to_numpy(np.float64) if "cost" in df.columns else None
    dup = q["query_id"].duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise DataValidationError(f"query {q['query_id'].iloc[i]!r} appears twice", source=str(path),
                                  row=line(i, "query_id"), column="query_id")
    # without ids each record is a probe of its own: one text answered twice would be fitted
    # as two probes. With ids, two queries may share a text (the data has such pairs) and
    # rows whose text comes from --data may have none.
    again = None if ids_given else q["text"].duplicated().to_numpy()
    if again is not None and again.any():
        i = int(np.flatnonzero(again)[0])
        first = int(np.flatnonzero((q["text"] == q["text"].iloc[i]).to_numpy())[0])
        raise DataValidationError(f"probe text {q['text'].iloc[i]!r} appears twice (lines "
                                  f"{line(first, 'text')} and {line(i, 'text')}); expected each "
                                  f"probe once", source=str(path), row=line(i, "text"),
                                  column="text")
    weights = df["weight"].to_numpy(np.float64) if "weight" in df.columns else None
    if weights is not None and not weights.sum() > 0:
        raise DataValidationError("every weight is 0; at least one must be > 0", source=str(path),
                                  column="weight")
    probes = probe_data(name, RoutingData(q, [name], scores, costs, name="answers", source=str(path)))
    return probes, weights


def _check_text_lengths(df: pd.DataFrame, given: np.ndarray, path: Path, line) -> None:
    """Refuse a probe text over ``MAX_TEXT_LENGTH`` characters, naming the file line of the
    text (``given``) or of the query_id whose text came from ``--data``."""
    from .probes_input import MAX_TEXT_LENGTH
    size = df["text"].map(lambda t: len(t) if isinstance(t, str) else 0).to_numpy()
    over = np.flatnonzero(size > MAX_TEXT_LENGTH)
    if not over.size:
        return
    i = int(over[0])
    if given[i]:
        raise DataValidationError(f"text has {size[i]} characters; at most {MAX_TEXT_LENGTH} "
                                  "allowed", source=str(path), row=line(i, "text"), column="text")
    raise DataValidationError(f"the text of query {df['query_id'].iloc[i]!r} in --data has "
                              f"{size[i]} characters; at most {MAX_TEXT_LENGTH} allowed",
                              source=str(path), row=line(i, "query_id"), column="query_id")


def answers_sha256(path) -> str | None:
    """Hex SHA-256 of an answers file (None when it is missing or over
    :data:`MAX_ANSWER_BYTES`: :func:`read_answers` says so)."""
    import hashlib
    path = Path(path)
    if not path.is_file() or path.stat().st_size > MAX_ANSWER_BYTES:
        return None
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def resolve_score_range(router, data: RoutingData | None = None, option=None
                        ) -> tuple[tuple[float, float], str]:
    """The training scores' range a new LLM's probe scores are held to, and where it came
    from: the range the router records (``"artifact"``), else the operator's explicit
    ``option`` (``"option"``), else that of ``data``'s observed scores (``"data"``), else
    [0, 1] assumed (``"default"``: never unchecked).

    Raises
    ------
    ValueError
        ``option`` given for a router that records another range (it is only for artifacts
        written before the range was recorded), or not a finite ``(low, high)``.

    Example
    -------
    >>> class Old: score_range_ = None
    >>> resolve_score_range(Old()), resolve_score_range(Old(), option=(1, 10))
    (((0.0, 1.0), 'default'), ((1.0, 10.0), 'option'))
    """
    own = getattr(router, "score_range_", None)
    if option is not None:
        low, high = (float(x) for x in option)
        if not (np.isfinite(low) and np.isfinite(high) and low <= high):
            raise ValueError(f"score range {list(option)}: expected finite LOW <= HIGH")
        if own is not None and (float(own[0]), float(own[1])) != (low, high):
            raise ValueError(f"the artifact records its training score range "
                             f"[{float(own[0]):g}, {float(own[1]):g}]; --score-range "
                             f"[{low:g}, {high:g}] is only for artifacts that record none")
        return (low, high), ("artifact" if own is not None else "option")
    if own is not None:
        return (float(own[0]), float(own[1])), "artifact"
    rng = observed_range(data.scores) if data is not None else None
    if rng is not None:
        return rng, "data"
    return UNKNOWN_RANGE_SCALE, "default"


def pool_table(manifest: dict) -> pd.DataFrame:
    """The LLM table (name, prices, size) recorded in an artifact manifest."""
    rows = [{k: r.get(k) for k in ("name", "input_price", "output_price", "size")}
            for r in manifest.get("llms") or []]
    return pd.DataFrame(rows, columns=["name", "input_price", "output_price", "size"])


def onboard_artifact(artifact, name: str, probes: RoutingData, out, *, price_in=None,
                     price_out=None, strategy: str | None = None, weights=None,
                     overwrite: bool = False, sign_key: str | bytes | None = None,
                     loaded=None, probes_file=None, probes_sha256: str | None = None,
                     score_range=None) -> Path:
    """Load ``artifact``, add LLM ``name`` from ``probes`` (with optional probe ``weights``)
    and export the result to ``out`` (written to a temporary folder and renamed: nothing
    half-written). The new LLM's provenance (probe count, strategy, whether weighted, date)
    is recorded in the manifest's pool.

    A signed artifact needs its ``sign_key``: its signature is verified on load and the new
    artifact is signed with the same key (without the key it is refused, so a signed
    artifact never yields an unsigned one). ``loaded``: ``load_router(artifact,
    sign_key=sign_key)`` when the caller has it already (it is not loaded again).

    The new manifest records its provenance (:mod:`recsys_router.export.provenance`): the
    source's ``training_data`` plus an ``onboarded`` entry (LLM, probe count, whether
    weighted, ``probes_file``'s name and SHA-256, the score range the probes were held to
    and where it came from, the source manifest's SHA-256, date); its ``metrics`` are
    empty and the source's move to ``source_metrics``, marked as the source router's.
    ``score_range``: ``(range, source)`` from :func:`resolve_score_range` (default: the
    router's recorded range, else [0, 1] assumed); a range from ``"data"`` or ``"option"``
    becomes the router's, so the new artifact records it. ``strategy``: a label of at most
    100 printable characters (:func:`~recsys_router.coldstart.probes_input.check_strategy_label`,
    checked before the artifact is loaded; None records ``"unspecified"``)."""
    from recsys_router.export.artifact import ArtifactError, export_router, load_router
    from .probes_input import check_strategy_label
    if strategy is not None:
        strategy = check_strategy_label(strategy)
    src = loaded if loaded is not None else load_router(artifact, sign_key=sign_key)
    if src.manifest.get("signature") and sign_key is None:
        raise ArtifactError(f"{Path(artifact) / 'manifest.json'} is signed: pass its signing key "
                            "(--sign-key-env) to verify it and sign the onboarded artifact")
    out = Path(out)
    if out.exists() and not overwrite:
        raise ArtifactError(f"{out} already exists; pass --overwrite")
    from recsys_router.export.provenance import onboarded_fields, plain_file_name
    from recsys_router.export.safe_io import sha256_file
    from recsys_router.export.verify import LIMITS
    rng, rng_from = score_range if score_range is not None else resolve_score_range(src.router)
    if rng_from in ("data", "option"):
        src.router.score_range_ = tuple(float(x) for x in rng)  # checked by add_llm, recorded
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if probes_file is not None and probes_sha256 is None:
        probes_sha256 = answers_sha256(probes_file)
    entry = {"llm": name, "n_probes": int(probes.n_queries), "weighted": weights is not None,
             "probes_file": None if probes_file is None else plain_file_name(probes_file),
             "probes_sha256": probes_sha256, "score_range": [float(x) for x in rng],
             "score_range_from": rng_from,
             "source_manifest_sha256": sha256_file(Path(artifact) / "manifest.json",
                                                   max_bytes=LIMITS["manifest_bytes"]),
             "date": date}
    prov = {"strategy": strategy or "unspecified", "date": date,
            "source_artifact": os.path.basename(os.path.abspath(artifact))}
    router = src.router.add_llm(name, probes, price_in=price_in, price_out=price_out,
                                weights=weights, provenance=prov)
    table = pool_table(src.manifest)
    table = pd.concat([table, pd.DataFrame([{"name": name, "input_price": price_in,
                                             "output_price": price_out, "size": None}])],
                      ignore_index=True)
    pol = src.manifest.get("default_policy") or {"name": "argmax", "value": None}
    training, source_metrics = onboarded_fields(src.manifest, entry)
    return export_router(router, out, llms=table, metrics=None, training_info=training,
                         source_metrics=source_metrics, policy=pol.get("name", "argmax"),
                         policy_value=pol.get("value"), overwrite=overwrite, sign_key=sign_key)
