"""Provenance of onboarded artifacts: what ``onboard`` records in the manifest, and its checks.

An artifact written by ``recsys-router onboard`` is not the router its source's metrics and
training data describe: it has LLMs the training data never held. Its manifest says so:

``training_data``   the source's training-data description, unchanged, plus ``onboarded``:
                    one entry per LLM added since (oldest first), see :data:`ONBOARDED_ENTRY`;
``metrics``         empty: nobody has measured this router (re-evaluate it to fill them);
``source_metrics``  ``{"note", "n_llms", "metrics"}``: the metrics last measured, on the
                    source router of ``n_llms`` LLMs before any onboarding, with a note
                    saying they do not describe this router.

Both new fields are optional (artifacts written before them, and plain exports, have none)
and are validated strictly on load (exact keys, types, sizes, counts, names in the pool;
``source_metrics`` only with an ``onboarded`` list, ``n_llms`` plus its entries = the pool).
"""

from __future__ import annotations

import datetime as _dt
import re
import warnings
from pathlib import Path, PurePosixPath

from ..state import BOOL, FLOAT, INT, STR, DictOf, Opt, StateError, TupleOf, check_state

__all__ = ["ONBOARDED_ENTRY", "SOURCE_METRICS", "RANGE_SOURCES", "SOURCE_METRICS_NOTE",
           "check_onboard_fields", "check_onboarded_origin", "onboarded_fields",
           "plain_file_name", "warn_other_encoder"]

#: where the probe scores' range came from: the artifact's recorded training range, the
#: ``--data`` scores, the operator's ``--score-range``, or [0, 1] assumed (none known)
RANGE_SOURCES = ("artifact", "data", "option", "default")

#: one ``training_data.onboarded`` entry (exactly these keys)
ONBOARDED_ENTRY = {
    "llm": STR, "n_probes": INT, "weighted": BOOL,
    "probes_file": Opt(STR), "probes_sha256": Opt(STR),
    "score_range": TupleOf(FLOAT, FLOAT), "score_range_from": STR,
    "source_manifest_sha256": STR, "date": STR,
}

#: ``source_metrics`` (exactly these keys)
SOURCE_METRICS = {"note": STR, "n_llms": INT, "metrics": DictOf(Opt(FLOAT), 10_000)}

SOURCE_METRICS_NOTE = ("measured on the source router before the LLMs in "
                       "training_data.onboarded were added; they do not describe this router: "
                       "re-evaluate it for its own metrics")

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_DATE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def _fields(spec: dict, value, where: str) -> dict:
    """An object with exactly the keys of ``spec``, each checked (``where`` names it)."""
    if not isinstance(value, dict):
        raise StateError(f"{where}: expected an object, got {type(value).__name__}")
    extra = sorted(set(value) - set(spec))
    if extra:
        raise StateError(f"{where}: undeclared field(s) {[str(k)[:40] for k in extra[:5]]}")
    return check_state(spec, value, {}, prefix=where + ".")


def plain_file_name(name) -> str | None:
    r"""``name``'s last path part when it may be recorded as ``probes_file`` (printable, at
    most 255 characters, no separator), else None.

    Example
    -------
    >>> plain_file_name("/tmp/answers.csv"), plain_file_name("a\\b.csv")
    ('answers.csv', None)
    """
    name = PurePosixPath(str(name)).name
    ok = 0 < len(name) <= 255 and "\\" not in name and name not in (".", "..") \
        and name.isprintable()
    return name if ok else None


def _check_entry(entry, where: str, pool: set) -> dict:
    e = _fields(ONBOARDED_ENTRY, entry, where)
    if e["llm"] not in pool:
        raise StateError(f"{where}.llm: {e['llm'][:80]!r} is not in the artifact's llms")
    if not 1 <= e["n_probes"] <= 10_000_000:
        raise StateError(f"{where}.n_probes: {e['n_probes']}, expected 1 to 10,000,000")
    name = e["probes_file"]
    if name is not None and plain_file_name(name) != name:
        raise StateError(f"{where}.probes_file: expected a plain file name, got {name[:80]!r}")
    for key in ("probes_sha256", "source_manifest_sha256"):
        if e[key] is not None and not _HEX64.match(e[key]):
            raise StateError(f"{where}.{key}: expected 64 lowercase hex digits")
    low, high = e["score_range"]
    if not (abs(low) < float("inf") and abs(high) < float("inf") and low <= high):
        raise StateError(f"{where}.score_range: expected finite [lowest, highest], got "
                         f"{[low, high]}")
    if e["score_range_from"] not in RANGE_SOURCES:
        raise StateError(f"{where}.score_range_from: {e['score_range_from'][:40]!r}, expected "
                         f"one of {list(RANGE_SOURCES)}")
    if not _DATE.match(e["date"]) or not _real_date(e["date"]):
        raise StateError(f"{where}.date: expected YYYY-MM-DDTHH:MM:SSZ, got {e['date'][:40]!r}")
    return e


def _real_date(text: str) -> bool:
    """Whether ``text`` (already of the form YYYY-MM-DDTHH:MM:SSZ) is a calendar date and time."""
    try:
        _dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return False
    return True


def _check_entry_range(e: dict, where: str, recorded) -> None:
    """An entry's range against the manifest's ``score_range`` (``recorded``, None: none).

    Once a range is known (from the artifact, ``--data`` or ``--score-range``) it becomes
    the router's and the manifest's, and every later onboarding reads it back: such an entry
    holds the manifest's range. An entry with no known range (``"default"``) held its probes
    to [0, 1]; a later onboarding may have set another range, so it is checked on its own.
    """
    rng = [float(x) for x in e["score_range"]]
    if e["score_range_from"] == "default":
        if rng != [0.0, 1.0]:
            raise StateError(f"{where}.score_range: {rng}, expected [0.0, 1.0] for "
                             "score_range_from 'default'")
    elif recorded is not None and rng != [float(x) for x in recorded]:
        raise StateError(f"{where}.score_range: {rng} differs from the manifest's score_range "
                         f"{[float(x) for x in recorded]}")


def check_onboard_fields(manifest: dict) -> None:
    """Validate ``training_data.onboarded`` and ``source_metrics`` when present.

    Raises
    ------
    StateError
        Naming the field: a missing, extra or mistyped key, more entries than LLMs, an LLM
        named twice or not in the pool, a probe file that is a path, a digest or date of
        another form or an impossible date, a reversed or infinite range, a range that
        differs from the manifest's ``score_range`` (or, for ``"default"``, from [0, 1]), an
        unknown range source; ``source_metrics`` without an ``onboarded`` list, or whose
        ``n_llms`` plus the onboarded LLMs is not the pool's size.
    """
    pool = {r.get("name") for r in manifest["llms"]}
    td = manifest.get("training_data")
    onboarded = td.get("onboarded") if isinstance(td, dict) else None
    if onboarded is not None:
        if not isinstance(onboarded, list):
            raise StateError(f"training_data.onboarded: expected a list, got "
                             f"{type(onboarded).__name__}")
        if len(onboarded) > len(pool):
            raise StateError(f"training_data.onboarded: {len(onboarded)} entries, more than the "
                             f"{len(pool)} LLMs in the pool")
        seen = set()
        for i, entry in enumerate(onboarded):
            e = _check_entry(entry, f"training_data.onboarded[{i}]", pool)
            _check_entry_range(e, f"training_data.onboarded[{i}]", manifest.get("score_range"))
            if e["llm"] in seen:
                raise StateError(f"training_data.onboarded[{i}].llm: {e['llm'][:80]!r} is "
                                 "named twice")
            seen.add(e["llm"])
    sm = manifest.get("source_metrics")
    if sm is not None:
        s = _fields(SOURCE_METRICS, sm, "source_metrics")
        if not 1 <= s["n_llms"] <= 100_000:
            raise StateError(f"source_metrics.n_llms: {s['n_llms']}, expected 1 to 100,000")
        if len(s["note"]) > 1000:
            raise StateError("source_metrics.note: over 1000 characters")
        _check_source_pool(s["n_llms"], onboarded, len(manifest["llms"]))


def _check_source_pool(n_llms: int, onboarded, n_pool: int) -> None:
    """``source_metrics`` describe the source router of ``n_llms`` LLMs before every LLM in
    ``training_data.onboarded`` was added (``onboard`` appends one entry per LLM and keeps
    the first source's metrics), so the list must be there and the two must add up to the
    pool."""
    if not onboarded:
        raise StateError("source_metrics: present, but training_data.onboarded lists no "
                         "onboarded LLM (source metrics belong to an onboarded artifact)")
    if n_llms + len(onboarded) != n_pool:
        raise StateError(f"source_metrics.n_llms: {n_llms} source LLMs plus "
                         f"{len(onboarded)} onboarded, expected {n_pool} (the pool's LLMs)")


def check_onboarded_origin(manifest: dict, llm_info) -> None:
    """Refuse a ``training_data.onboarded`` entry naming an LLM the router state does not
    record as onboarded (``llm_info``: the rebuilt router's ``llm_info_``, whose keys are
    the LLMs added after the fit): the manifest would call a fitted LLM onboarded, or the
    state's record of an onboarded LLM was dropped.

    Example
    -------
    >>> m = {"training_data": {"onboarded": [{"llm": "c"}]}}
    >>> check_onboarded_origin(m, {"c": {"origin": "onboarded"}})
    >>> check_onboarded_origin(m, {})
    Traceback (most recent call last):
    ...
    recsys_router.state.StateError: training_data.onboarded[0].llm: 'c' is not an onboarded LLM of the router state (llm_info_)
    """
    td = manifest.get("training_data")
    onboarded = td.get("onboarded") if isinstance(td, dict) else None
    info = llm_info if isinstance(llm_info, dict) else {}
    for i, entry in enumerate(onboarded or []):
        if entry["llm"] not in info:
            raise StateError(f"training_data.onboarded[{i}].llm: {entry['llm'][:80]!r} is not "
                             "an onboarded LLM of the router state (llm_info_)")


def onboarded_fields(src_manifest: dict, entry: dict) -> tuple[dict, dict | None]:
    """``(training_data, source_metrics)`` of an artifact onboarded from ``src_manifest``
    with one new ``training_data.onboarded`` ``entry``.

    ``training_data`` keeps the source's description (``{}`` when it has none) and appends
    ``entry`` to its ``onboarded`` list. ``source_metrics`` holds the source's metrics when
    it has any (it was measured), else the source's own ``source_metrics`` (an onboarded
    artifact onboarded again), else None.

    Example
    -------
    >>> src = {"training_data": {"name": "d"}, "metrics": {"test/mu_o": 0.5},
    ...        "llms": [{"name": "a"}, {"name": "b"}]}
    >>> td, sm = onboarded_fields(src, {"llm": "c"})
    >>> td, sm["n_llms"], sm["metrics"]
    ({'name': 'd', 'onboarded': [{'llm': 'c'}]}, 2, {'test/mu_o': 0.5})
    """
    td = dict(src_manifest.get("training_data") or {})
    td["onboarded"] = list(td.get("onboarded") or []) + [entry]
    if src_manifest.get("metrics"):
        sm = {"note": SOURCE_METRICS_NOTE, "n_llms": len(src_manifest.get("llms") or []),
              "metrics": dict(src_manifest["metrics"])}
    else:
        sm = src_manifest.get("source_metrics")
    return td, sm


def warn_other_encoder(manifest: dict, router, path) -> None:
    """Warn when the rebuilt encoder's identity is not the one recorded at export: the same
    settings give other vectors here (int8 MiniLM weights chosen per CPU, another version of
    the packaged model), close to but not those the router was trained on.

    Parameters
    ----------
    manifest : dict
        The artifact's validated manifest (its ``encoder.identity``, when recorded).
    router : Router
        The rebuilt router (its ``encoder_``, when it has one).
    path : pathlib.Path
        The artifact folder, named in the warning.

    Example
    -------
    >>> warn_other_encoder({"encoder": None}, object(), "art")  # nothing recorded: no warning
    """
    recorded = (manifest.get("encoder") or {}).get("identity")
    enc = getattr(router, "encoder_", None)
    here = getattr(enc, "identity", None)
    if isinstance(recorded, str) and isinstance(here, str) and recorded != here:
        warnings.warn(f"{Path(path) / 'manifest.json'}: the artifact was exported with encoder "
                      f"{recorded[:160]!r}; rebuilt here it is {here[:160]!r} (another CPU's "
                      "int8 weight type or another packaged model version), so query vectors "
                      "differ slightly from those it was trained on", RuntimeWarning,
                      stacklevel=3)
