"""Checks that a checkpoint fits the data module it is loaded for: the LLMs it was trained on
(names and order, ``checkpoint["llm_names"]``), read by
:meth:`~recsys_router.models.base.router_module.RouterModule.on_load_checkpoint` (every
``fit|validate|test|predict --ckpt_path``) and by ``export --ckpt``.

A checkpoint's output column ``j`` holds the scores learnt for its ``j``-th LLM: loading it for
a data module whose ``j``-th LLM is another one credits each LLM's scores to another, so any
difference in the names or their order is refused.
"""

from __future__ import annotations

import warnings

from recsys_router.errors import DataValidationError

__all__ = ["check_llm_names"]

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
