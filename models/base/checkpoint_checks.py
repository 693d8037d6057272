"""Checks that a checkpoint fits the module and data module it is loaded for: the sizes it was
trained for (number of LLMs, embedding width, every weight's shape) and the LLMs it was trained
on (names and order, ``checkpoint["llm_names"]``), read by
:meth:`~recsys_router.models.base.router_module.RouterModule.on_load_checkpoint` (every
``fit|validate|test|predict --ckpt_path``) and by ``export --ckpt``.

A checkpoint's output column ``j`` holds the scores learnt for its ``j``-th LLM: loading it for
a data module whose ``j``-th LLM is another one credits each LLM's scores to another, so any
difference in the names or their order is refused.
"""

from __future__ import annotations

import warnings

from recsys_router.errors import DataValidationError

__all__ = ["check_llm_names", "check_checkpoint_sizes", "check_encoder", "encoder_identity_of"]

#: names shown of each list in an error
_SHOWN = 10


def _first_difference(trained: list[str], names: list[str]) -> int:
    """The first position where the two lists differ (the shorter length when one is a
    prefix of the other)."""
    for pos, (a, b) in enumerate(zip(trained, names)):
        if a != b:
            return pos
    return min(len(trained), len(names))


def check_llm_names(trained, names, source: str) -> None:
    """Refuse a checkpoint trained on other LLMs, or on the same LLMs in another order.

    Parameters
    ----------
    trained : sequence of str or None
        The checkpoint's ``llm_names`` (None: a checkpoint written before they were recorded;
        its columns are taken to be ``names`` in order, with a warning).
    names : sequence of str
        The data module's LLM names, in output order.
    source : str
        The checkpoint, as the error names it.

    Raises
    ------
    DataValidationError
        Naming the checkpoint, both lists and the first position where they differ.

    Example
    -------
    >>> check_llm_names(["a", "b"], ["a", "b"], "x.ckpt")
    >>> try:
    ...     check_llm_names(["a", "b"], ["b", "a"], "x.ckpt")
    ... except ValueError as exc:
    ...     print(str(exc)[str(exc).index("they differ"):][:58])
    they differ first at position 0 (checkpoint 'a', data 'b')
    """
    names = [str(n) for n in names]
    if trained is None:
        warnings.warn(f"{source}: the checkpoint records no LLM names (written by an older "
                      f"version); its score columns are taken to be the data module's LLMs in "
                      f"this order: {names[:_SHOWN]}", stacklevel=2)
        return
    trained = [str(n) for n in trained]
    if trained == names:
        return
    pos = _first_difference(trained, names)
    mine = repr(trained[pos]) if pos < len(trained) else "none"
    theirs = repr(names[pos]) if pos < len(names) else "none"
    raise DataValidationError(
        f"{source}: the checkpoint was trained on LLMs {trained[:_SHOWN]} but the data module "
        f"gives {names[:_SHOWN]}: they differ first at position {pos} (checkpoint {mine}, data "
        f"{theirs}), so each LLM's scores would be credited to another (check the data config: "
        "dataset, candidates, candidate_group, pool_size, group_method)")


#: size hyperparameters linked from the data module, as an error names them
_SIZES = (("n_llms", "number of LLMs"), ("embed_dim", "embedding width"))


def check_checkpoint_sizes(module, checkpoint: dict, source: str) -> None:
    """Refuse a checkpoint trained on data of another size than ``module`` was built for (its
    ``n_llms`` / ``embed_dim``, linked from the data module), or whose weights have other
    shapes, before ``load_state_dict`` fails on them with torch's many-line size mismatch.

    Parameters
    ----------
    module : RouterModule
        The module the checkpoint is about to be loaded into.
    checkpoint : dict
        The loaded checkpoint (``hyper_parameters``, ``state_dict``).
    source : str
        The checkpoint, as the error names it.

    Raises
    ------
    DataValidationError
        Naming the checkpoint and each size that differs (checkpoint's, then the data's).

    Example
    -------
    >>> from recsys_router.models.mf_module import MFModule
    >>> ckpt = {"hyper_parameters": {"n_llms": 8, "embed_dim": 16}}
    >>> try:
    ...     check_checkpoint_sizes(MFModule(n_llms=5, embed_dim=16, dim=4), ckpt, "x.ckpt")
    ... except ValueError as exc:
    ...     print(exc)
    x.ckpt: the checkpoint does not fit this data: number of LLMs 8 in the checkpoint, 5 here (train on this data, or configure the data the checkpoint was trained on)
    """
    hparams = checkpoint.get("hyper_parameters")
    hparams = hparams if isinstance(hparams, dict) else {}
    diffs = []
    for key, words in _SIZES:
        theirs, mine = hparams.get(key), getattr(module, key, None)
        if isinstance(theirs, int) and mine is not None and theirs != mine:
            diffs.append(f"{words} {theirs} in the checkpoint, {mine} here")
    if not diffs:  # another size the data decides (a feature width): the first weight's shape
        state = checkpoint.get("state_dict")
        own = module.state_dict()
        for key, value in (state.items() if isinstance(state, dict) else ()):
            shape = tuple(getattr(value, "shape", ()))
            if key in own and shape != tuple(own[key].shape):
                diffs.append(f"weight {key} has shape {shape} in the checkpoint, "
                             f"{tuple(own[key].shape)} here")
                break
    if diffs:
        raise DataValidationError(
            f"{source}: the checkpoint does not fit this data: {'; '.join(diffs)} (train on "
            "this data, or configure the data the checkpoint was trained on)")


def _family(spec) -> str:
    """An encoder spec's family: ``"minilm:int8"`` -> ``"minilm"`` (a variant of one model)."""
    return str(spec).split(":", 1)[0].strip().lower()


#: the model every ``minilm`` variant runs (their embeddings agree to cosine ~0.99)
_MINILM = "all-MiniLM-L6-v2"


def _same_space(a: str, b: str) -> bool:
    """Whether two encoder identities give the same embeddings; a precomputed table is known by
    its contents' stamp (after the last ``@``), not by the path it was read from."""
    if a.startswith("precomputed:") and b.startswith("precomputed:"):
        return a.rpartition("@")[2] == b.rpartition("@")[2]
    return a == b


def encoder_identity_of(dm) -> str | None:
    """The identity of ``dm``'s encoder (None when it has none)."""
    try:
        identity = dm.encoder.identity  # built (and fitted) as the run itself needs it
    except Exception:  # noqa: BLE001 - a data module without one: nothing to compare
        return None
    return identity if isinstance(identity, str) else None


def check_encoder(checkpoint: dict, dm, source: str) -> None:
    """Refuse a checkpoint trained on embeddings of another encoder than ``dm``'s.

    A checkpoint records its encoder's ``identity`` (``checkpoint["encoder_identity"]``, which
    names the encoder, its settings and, for a fitted one such as ``tfidf``, what it was fitted
    on); that is compared with the data module's encoder's. An older checkpoint is compared by
    the data-module hyperparameters it holds (``encoder``, ``encoder_options``). Another encoder
    family (``hashing`` against ``tfidf``), other settings or another fit give the weights
    inputs from another space: refused. Another variant of MiniLM (``minilm`` against
    ``minilm:torch``, embeddings agreeing to cosine ~0.99), or, for an older checkpoint,
    options written differently, only warn. Without an encoder on either side: no check.

    Raises
    ------
    DataValidationError
        Naming the checkpoint and both encoders.

    Example
    -------
    >>> from types import SimpleNamespace as NS
    >>> dm = NS(hparams={"encoder": "tfidf"}, encoder=NS(identity="tfidf-v1(dim=32)@ab"))
    >>> try:
    ...     check_encoder({"datamodule_hyper_parameters": {"encoder": "hashing"},
    ...                    "encoder_identity": "hashing-v1(dim=32)"}, dm, "x.ckpt")
    ... except ValueError as exc:
    ...     print(str(exc)[:70])
    x.ckpt: the checkpoint was trained on embeddings of encoder 'hashing' 
    """
    was = checkpoint.get("datamodule_hyper_parameters") or {}
    now = getattr(dm, "hparams", None) or {}
    was_spec = (was.get("encoder"), was.get("encoder_options") or {})
    now_spec = (now.get("encoder"), now.get("encoder_options") or {})
    said = (f"{source}: the checkpoint was trained on embeddings of encoder {was_spec[0]!r} "
            f"(options {was_spec[1]!r}) but the data module encodes with {now_spec[0]!r} "
            f"(options {now_spec[1]!r})")
    refuse = ": its weights would read inputs from another space (configure the data module's " \
             "encoder as the checkpoint's)"
    variant = ": another variant of the same model; its embeddings differ slightly, so results " \
              "may differ a little from the trained run's"
    trained = checkpoint.get("encoder_identity")
    current = encoder_identity_of(dm) if isinstance(trained, str) and dm is not None else None
    if current is not None:
        if _same_space(trained, current):
            return
        if _MINILM in trained and _MINILM in current:
            warnings.warn(said + variant, stacklevel=2)
            return
        if was_spec == now_spec:  # the same settings, another fit (tfidf on other texts)
            said += f", fitted differently (identity {trained[:120]!r}, here {current[:120]!r})"
        raise DataValidationError(said + refuse)
    if was_spec[0] is None or now_spec[0] is None or was_spec == now_spec:
        return
    if _family(was_spec[0]) != _family(now_spec[0]):
        raise DataValidationError(said + refuse)
    warnings.warn(said + ": the checkpoint records no encoder identity (an older version), so "
                  "the options cannot be compared exactly; if they give other embeddings, "
                  "its results are meaningless", stacklevel=2)
