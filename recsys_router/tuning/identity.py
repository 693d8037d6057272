"""What a study tunes: the identity a study records (router, search-space and config hashes)
and the trial attributes that mark a trial as one of ``recsys-router tune``'s.

:func:`~recsys_router.tuning.study.open_study` uses these to refuse a run of anything else on
an existing study, and a study made by another tool.
"""

from __future__ import annotations

import hashlib
import json
import logging

from optuna.trial import TrialState

__all__ = ["IDENTITY_KEYS", "study_identity", "own_trial"]

log = logging.getLogger("recsys_router.tuning.study")  # the warnings users filter on


#: study user attributes that say what a study tunes (see :func:`open_study`)
_IDENTITY_WHAT = {"router": "router", "search_space_hash": "search space (hash)",
                  "config_hash": "configs (-c files and overrides, hash)",
                  "data_fingerprint": "data (fingerprint of the train/val splits' contents: the "
                                      "data changed since the study was created)"}
IDENTITY_KEYS = tuple(_IDENTITY_WHAT)


#: trial user attributes every trial of this tool records before it trains
_OWN_TRIAL_ATTRS = ("config", "overrides")


def own_trial(trial) -> bool:
    """Whether ``trial`` carries the trial attributes this tool records (``config``, ``overrides``)."""
    return all(k in trial.user_attrs for k in _OWN_TRIAL_ATTRS)


def _foreign_reason(trials, search_keys) -> str | None:
    """Why ``trials`` (of a study without identity attributes) are not an older recsys-router's,
    or None when they look like its trials."""
    keys = None if search_keys is None else set(search_keys)
    for t in trials:
        if keys is not None and not set(t.params) <= keys:
            return (f"trial {t.number} has parameters {sorted(set(t.params) - keys)[:5]} that are "
                    "not in the search space")
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED) and not own_trial(t):
            return f"{t.state.name} trial {t.number} has no {'/'.join(_OWN_TRIAL_ATTRS)} trial attributes"
    if not any(own_trial(t) for t in trials):
        return f"none of its trials has the {'/'.join(_OWN_TRIAL_ATTRS)} trial attributes"
    return None


def _refuse_foreign(study, identity: dict, search_keys, study_name: str, where: str) -> None:
    """Refuse a study with trials, no identity attributes and trials this tool did not make."""
    if any(k in study.user_attrs for k in identity):
        return
    trials = study.get_trials(deepcopy=False)
    reason = _foreign_reason(trials, search_keys) if trials else None
    if reason is not None:
        raise ValueError(f"study {study_name!r} in {where} was not made by recsys-router tune "
                         f"({reason}); its trials cannot be mixed with this run's (use another "
                         "--study-name or --storage)")


def _check_identity(study, identity: dict, study_name: str, where: str) -> None:
    """Record ``identity`` on a study that lacks it; refuse one that recorded another."""
    stored = study.user_attrs
    missing = [k for k in identity if k not in stored]
    if missing:
        if len(missing) == len(identity) and study.get_trials(deepcopy=False):
            log.warning("study %r in %s has no record of the router, search space and configs it "
                        "tunes (made by an older recsys-router); assuming this run's: its earlier "
                        "trials are kept as they are", study_name, where)
        for k in missing:
            study.set_user_attr(k, identity[k])
        stored = study.user_attrs  # read back: another worker may have set them first
    differ = [f"{_IDENTITY_WHAT.get(k, k)} {stored[k]}, not {identity[k]}"
              for k in identity if stored.get(k) != identity[k]]
    if differ:
        raise ValueError(f"study {study_name!r} in {where} was created for another run: "
                         f"{'; '.join(differ)}; its trials cannot be mixed with this run's (use "
                         "another --study-name or --storage)")


def study_identity(router: str, search_spec, config, data: str | None = None) -> dict[str, str]:
    """What a tuning run tunes, as :func:`open_study` records it: the router (or model class)
    name, 16-hex-digit SHA-256 hashes of the search-space specification and of the config,
    and (``data`` given) the fingerprint of the data the trials are scored on
    (:func:`~recsys_router.tuning.preflight.splits_fingerprint`): the same configs over a data
    file that changed are another run.

    Example
    -------
    >>> study_identity("knn", {"params.k": {"type": "int", "low": 1, "high": 9}},
    ...                {"data": {"n": 1}})["router"]
    'knn'
    """
    def digest(obj) -> str:
        text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    out = {"router": str(router), "search_space_hash": digest(search_spec),
           "config_hash": digest(config)}
    if data is not None:
        out["data_fingerprint"] = str(data)
    return out
