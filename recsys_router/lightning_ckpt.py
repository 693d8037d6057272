"""What a ``--ckpt_path`` of ``recsys-router fit|validate|test|predict`` may be, and the checks
of the checkpoint it names before LightningCLI parses its hyperparameters (used by
:mod:`recsys_router.lightning_cli`).

A checkpoint is untrusted data: it is read as plain data only (``weights_only``), by this
module and by Lightning's own restore, which the router CLI always asks for
``weights_only=True``. So ``--ckpt_path`` must be an existing local file
(:func:`check_ckpt_path`): Lightning would fetch a URL (``http(s)://``) or any fsspec path
(``s3://``, ``file://``, ``memory://``, ``simplecache::...``, ``data:``) itself and unpickle a
remote one in full, and its keywords (``last``, ``best``, ``hpc``, ``registry``) name a file
no check here has read. Each refusal is one
:class:`~recsys_router.errors.ConfigArgumentError` naming ``--ckpt_path`` (exit 2).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["check_ckpt_path", "check_weights_only", "read_ckpt_hparams", "check_ckpt_hparams",
           "check_ckpt_model_class", "LIGHTNING_CKPT_KEYWORDS"]

#: the ``ckpt_path`` values Lightning resolves itself instead of reading them as a path
LIGHTNING_CKPT_KEYWORDS = ("last", "best", "hpc", "registry")
#: a URL scheme or fsspec protocol (``http:``, ``s3:``, ``file:``, ``data:``...), or chaining
_REMOTE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:|::")
_ACCEPTED = ("only a local checkpoint file is accepted (e.g. "
             "lightning_logs/version_0/checkpoints/last.ckpt)")


def check_ckpt_path(value) -> str | None:
    """The ``--ckpt_path`` value as the local file Lightning will open, or None when none is
    given.

    Parameters
    ----------
    value : str or os.PathLike or None

    Returns
    -------
    str or None

    Raises
    ------
    ConfigArgumentError
        Naming ``--ckpt_path``: a URL or fsspec path, one of Lightning's keywords, no
        existing regular file, or a path that fsspec (which Lightning opens it with) would
        read as another file than the one checked here (``~/x.ckpt``).

    Example
    -------
    >>> check_ckpt_path(None) is None
    True
    >>> check_ckpt_path("http://127.0.0.1/evil.ckpt")
    Traceback (most recent call last):
    ...
    recsys_router.errors.ConfigArgumentError: --ckpt_path: 'http://127.0.0.1/evil.ckpt' is a URL or fsspec path: only a local checkpoint file is accepted (e.g. lightning_logs/version_0/checkpoints/last.ckpt)
    """
    from recsys_router.errors import ConfigArgumentError  # noqa: PLC0415
    if value is None or value == "":
        return None
    path = os.fspath(value)
    if path in LIGHTNING_CKPT_KEYWORDS[:3] or path.lower() == "registry" \
            or path.lower().startswith("registry:"):
        raise ConfigArgumentError(f"{path!r} is a Lightning keyword, which picks a checkpoint "
                                  f"no check reads: {_ACCEPTED} (./{path} for a file of that "
                                  "name)", "--ckpt_path")
    if _REMOTE.search(path):
        raise ConfigArgumentError(f"{path!r} is a URL or fsspec path: {_ACCEPTED}",
                                  "--ckpt_path")
    if not Path(path).is_file():
        raise ConfigArgumentError(f"{path!r}: no such file; {_ACCEPTED}", "--ckpt_path")
    from fsspec.core import url_to_fs  # noqa: PLC0415
    from fsspec.implementations.local import LocalFileSystem  # noqa: PLC0415
    try:
        fs, opened = url_to_fs(path)
    except (ValueError, ImportError, OSError):
        fs, opened = None, None
    if not isinstance(fs, LocalFileSystem) or \
            os.path.normpath(opened) != os.path.normpath(os.path.abspath(path)):
        raise ConfigArgumentError(f"{path!r} would be opened as another file than the one "
                                  f"checked: {_ACCEPTED}", "--ckpt_path")
    return path


def check_weights_only(value) -> None:
    """Refuse ``--weights_only=false``: the checkpoint is read as plain data only (a fit's
    own checkpoints load so); unpickling code needs ``export --ckpt ... --trust-pickle``.

    Raises
    ------
    ConfigArgumentError
        Naming ``--weights_only``.
    """
    if value is False:
        from recsys_router.errors import ConfigArgumentError  # noqa: PLC0415
        raise ConfigArgumentError("false is refused: --ckpt_path checkpoints are read as plain "
                                  "data only (weights_only=True, as fit writes them)",
                                  "--weights_only")


def read_ckpt_hparams(path: str) -> dict:
    """The ``hyper_parameters`` mapping of the checkpoint at ``path`` (empty when it has none),
    read with ``weights_only`` (no pickled code).

    Raises
    ------
    DataValidationError
        Naming the file: it is no torch checkpoint, or it or its ``hyper_parameters`` is not
        a mapping.
    """
    import pickle  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from recsys_router.errors import DataValidationError  # noqa: PLC0415
    try:
        ckpt = torch.load(path, weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError,
            AttributeError, ImportError, KeyError, IndexError, OverflowError) as exc:
        # torch's own text is many lines, about weights_only: the exception type says enough
        raise DataValidationError(f"{path}: not a torch checkpoint that loads as plain data "
                                  f"(weights_only; {type(exc).__name__})") from None
    if not isinstance(ckpt, dict):
        raise DataValidationError(f"{path}: a checkpoint must be a mapping, got "
                                  f"{type(ckpt).__name__}")
    hparams = ckpt.get("hyper_parameters") or {}
    if not isinstance(hparams, dict):
        raise DataValidationError(f"{path}: hyper_parameters must be a mapping, got "
                                  f"{type(hparams).__name__}")
    return hparams


def check_ckpt_hparams(hparams: dict, source: str) -> None:
    """Refuse a checkpoint whose model ``_class_path`` lies outside ``recsys_router.models.``,
    that has ``class_path`` / ``init_args`` keys without ``_class_path`` (LightningCLI always
    writes ``_class_path``) or whose ``loss`` is not the project's loss as plain data
    (compared as text, nothing imported).

    Raises
    ------
    DataValidationError
        Naming the checkpoint and the field.
    """
    from recsys_router.errors import DataValidationError  # noqa: PLC0415
    from recsys_router.models.losses import RoutingLoss  # noqa: PLC0415
    if "_class_path" in hparams:
        path = hparams["_class_path"]
        mod, _, name = path.rpartition(".") if isinstance(path, str) else ("", "", "")
        if not mod.startswith("recsys_router.models.") or not name.isidentifier():
            raise DataValidationError(f"{source}: hyper_parameters._class_path {path!r} is not a "
                                      "RouterModule under recsys_router.models. (train with "
                                      "recsys-router fit)")
    elif "class_path" in hparams or "init_args" in hparams:
        # LightningCLI writes the model as _class_path plus its arguments: this shape would be
        # parsed as a class_path section, nested class paths (a loss) unchecked
        raise DataValidationError(f"{source}: hyper_parameters has class_path/init_args but no "
                                  "_class_path: not a checkpoint of recsys-router fit")
    if isinstance(hparams.get("loss"), dict):
        try:
            RoutingLoss.from_config(hparams["loss"], f"{source}: hyper_parameters.loss")
        except ValueError as exc:  # one error line, exit 2 (recsys_router.cli)
            raise DataValidationError(str(exc)) from None


def check_ckpt_model_class(hparams: dict, model_config, source: str) -> None:
    """Refuse a checkpoint of another model class than the configured model's ``class_path``
    (LightningCLI would parse the checkpoint's class over the config and evaluate it instead
    of the model the user named). Nothing to compare when either names no class.

    Raises
    ------
    DataValidationError
        Naming the checkpoint, its class and the configured one.
    """
    from recsys_router.errors import DataValidationError  # noqa: PLC0415
    trained = hparams.get("_class_path")
    configured = model_config.get("class_path") if hasattr(model_config, "get") else None
    if isinstance(trained, str) and isinstance(configured, str) and trained != configured:
        raise DataValidationError(
            f"{source}: the checkpoint holds a {trained} but the config names the model "
            f"{configured}: give the model config the checkpoint was trained with")
