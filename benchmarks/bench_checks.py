"""Argument checks and safe file writes shared by the benchmark scripts.

The argument types refuse a bad value when the command line is parsed, so argparse prints one
line naming the flag (``argument --folds: expected a whole number >= 2, got '1'``) instead of
a traceback after minutes of work or a run on a meaningless value. The writers put results
through a temporary file and a rename (:func:`recsys_router.atomic.atomic_write`), so a run
that dies mid-write leaves the previous file whole; :func:`locked_folder` serialises the
read-modify-write of a shared Markdown file between benchmark runs made side by side.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from pathlib import Path
from typing import Callable, Iterable, Iterator

from recsys_router.atomic import atomic_write
from recsys_router.cli.args import (OptionError, count, fraction, positive_float, positive_int,
                                    whole_number)

__all__ = ["OptionError", "count", "positive_int", "positive_float", "at_least", "int_list",
           "name_list", "one_name", "item_list", "share", "pool_list", "write_text_atomic",
           "to_csv_atomic", "locked_folder"]


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``low``.

    Example
    -------
    >>> at_least(2)("3")
    3
    >>> at_least(2)("1")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a whole number >= 2, got '1'
    """
    def check(text) -> int:
        return whole_number(text, "a whole number", low)
    return check


def int_list(low: int = 1) -> Callable[[str], list[int]]:
    """An argparse type: a non-empty comma-separated list of whole numbers, each >= ``low``.

    Example
    -------
    >>> int_list(1)("1,16,128")
    [1, 16, 128]
    >>> int_list(1)("1,0")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a comma-separated list of whole numbers >= 1, got '1,0'
    """
    def check(text) -> list[int]:
        try:
            return [whole_number(x, "a whole number", low) for x in str(text).split(",")]
        except OptionError:
            raise OptionError(f"expected a comma-separated list of whole numbers >= {low}, "
                              f"got {str(text)[:40]!r}") from None
    return check


def _valid_text(valid: Iterable[str]) -> str:
    names = sorted(valid)
    return ", ".join(names) if len(names) <= 60 else ", ".join(names[:60]) + ", ..."


def name_list(valid: Callable[[], Iterable[str]], what: str,
              accept: Callable[[str], bool] | None = None) -> Callable[[str], list[str]]:
    """An argparse type: a non-empty comma-separated list of names from ``valid()``.

    ``accept`` may allow further names (e.g. a prefixed form). An unknown name is refused
    with the list of valid ones.

    Example
    -------
    >>> name_list(lambda: ["a", "b"], "router")("b, a")
    ['b', 'a']
    >>> name_list(lambda: ["a", "b"], "router")("a,c")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: unknown router 'c'; expected some of: a, b
    """
    def check(text) -> list[str]:
        names = [x.strip() for x in str(text).split(",") if x.strip()]
        if not names:
            raise OptionError(f"expected a comma-separated list of {what} names, got {str(text)[:40]!r}")
        known = set(valid())
        for n in names:
            if n not in known and not (accept is not None and accept(n)):
                raise OptionError(f"unknown {what} {n[:60]!r}; expected some of: {_valid_text(known)}")
        return names
    return check


def one_name(valid: Callable[[], Iterable[str]], what: str,
             accept: Callable[[str], bool] | None = None) -> Callable[[str], str]:
    """An argparse type: exactly one name from ``valid()`` (or one ``accept`` allows).

    Example
    -------
    >>> one_name(lambda: ["a", "b"], "router")("a")
    'a'
    """
    def check(text) -> str:
        name = str(text).strip()
        known = set(valid())
        if name not in known and not (name and accept is not None and accept(name)):
            raise OptionError(f"unknown {what} {name[:60]!r}; expected one of: {_valid_text(known)}")
        return name
    return check


def item_list(item: Callable[[str], object], what: str) -> Callable[[str], list]:
    """An argparse type: a non-empty comma-separated list, each item checked by the argparse
    type ``item`` (whose message names the bad item).

    Example
    -------
    >>> item_list(positive_int, "count")("3, 4")
    [3, 4]
    >>> item_list(positive_int, "count")(",")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a comma-separated list of counts, got ','
    """
    def check(text) -> list:
        items = [x.strip() for x in str(text).split(",") if x.strip()]
        if not items:
            raise OptionError(f"expected a comma-separated list of {what}s, got {str(text)[:40]!r}")
        return [item(x) for x in items]
    return check


def share(*, zero: bool = True, one: bool = True) -> Callable[[str], float]:
    """An argparse type: a number from 0 to 1 (:func:`recsys_router.cli.args.fraction`),
    0 itself refused unless ``zero`` and 1 itself unless ``one``.

    Example
    -------
    >>> share(zero=False)("1")
    1.0
    >>> share(zero=False, one=False)("1")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a number > 0 and < 1, got '1'
    """
    def check(text) -> float:
        v = fraction(text)
        if (v == 0 and not zero) or (v == 1 and not one):
            raise OptionError(f"expected a number {'>=' if zero else '>'} 0 and "
                              f"{'<=' if one else '<'} 1, got {str(text)[:40]!r}")
        return v
    return check


def pool_list(text) -> list:
    """An argparse type: pool sizes, ``"3,5,all"`` -> ``[3, 5, "all"]``
    (:func:`recsys_router.evaluation.splits.parse_pools`).

    Example
    -------
    >>> pool_list("3,5,all")
    [3, 5, 'all']
    >>> pool_list("3,x")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: pool size 'x' is neither an integer nor 'all'
    """
    from recsys_router.evaluation.splits import parse_pools
    try:
        return parse_pools(str(text))
    except ValueError as err:
        raise OptionError(str(err)) from None


def write_text_atomic(path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, keeping the mode of
    an existing ``path`` (a new file gets the usual umask mode).

    Example
    -------
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "a.md"
    >>> _ = p.write_text("old"); os.chmod(p, 0o640)
    >>> write_text_atomic(p, "new")
    >>> p.read_text(), oct(stat.S_IMODE(p.stat().st_mode))
    ('new', '0o640')
    """
    path = Path(path)
    mode = stat.S_IMODE(path.stat().st_mode) if path.is_file() else None
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
        if mode is not None:
            os.chmod(tmp, mode)


def to_csv_atomic(frame, path) -> None:
    """``frame.to_csv(path, index=False)`` through a temporary file and a rename."""
    with atomic_write(path) as tmp:
        frame.to_csv(tmp, index=False)


@contextlib.contextmanager
def locked_folder(folder) -> Iterator[None]:
    """Hold an exclusive advisory lock (``flock``) on ``folder`` for the ``with`` block.

    Benchmark runs that rewrite the same file in ``folder`` (a README's marked blocks) take it
    around their read-modify-write, so one run never overwrites another's update; the lock is
    released when the block ends or the process dies, and leaves no file behind.
    """
    fd = os.open(str(folder), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
