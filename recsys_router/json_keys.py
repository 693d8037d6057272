"""A JSON object that names a key twice, refused wherever JSON comes in.

Python's ``json`` keeps the last value of a repeated key without a word, so
``{"budget": 0, "budget": 1000}`` reads as a budget of 1000 while another reader of the same
text may have seen 0. Every reader of outside JSON (data files, decision-log cells, artifact
manifests, judge records, request bodies) parses with :func:`unique_keys` as its
``object_pairs_hook`` and says where the :class:`RepeatedKey` came from.
"""

from __future__ import annotations

__all__ = ["RepeatedKey", "unique_keys"]


class RepeatedKey(ValueError):
    """An object names ``key`` twice; ``line`` (1-based, where the object starts) is set by a
    reader that can tell it, else None. Its text is ``duplicate key 'KEY'``."""

    def __init__(self, key: str):
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line = key, None


def unique_keys(pairs):
    """``object_pairs_hook`` for :func:`json.loads`: the object as a dict, or
    :class:`RepeatedKey` when a key is given twice (the usual case costs one dict, as
    ``json``'s own).

    Example
    -------
    >>> import json
    >>> json.loads('{"a": {"b": 1}, "b": 2}', object_pairs_hook=unique_keys)
    {'a': {'b': 1}, 'b': 2}
    >>> try:
    ...     json.loads('{"budget": 0, "budget": 1000}', object_pairs_hook=unique_keys)
    ... except RepeatedKey as exc:
    ...     print(exc.key, "|", exc)
    budget | duplicate key 'budget'
    """
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise RepeatedKey(k)
            seen.add(k)
    return out
