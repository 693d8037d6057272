"""The ONNX MiniLM's derived files, and what happens when one of them is damaged.

:func:`~recsys_router.encoders.onnx_minilm.export_minilm_onnx` keeps three files per packaged
weights: the graph as torch exports it (``-raw``), ONNX Runtime's BERT fusions of it
(``-fp32``) and their dynamic int8 quantization (``-int8`` / ``-int8u8``). Each is written to
a temporary file and renamed into place, without ``fsync``: a power cut after the rename can
leave one empty or cut, and a hand can leave a foreign file under its name. Every step that
reads one of them (fusing the raw graph, quantizing the fused one, opening an inference
session) therefore makes its input again once, from the packaged weights, when it cannot be
read; only a second failure is an error, naming the file.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from ..atomic import atomic_write

__all__ = ["fuse", "quantize", "read_or_rebuild", "not_loadable", "discard"]

#: failures that say nothing about the file read: never a reason to make it again
_NOT_THE_FILE = (ImportError, MemoryError)


def not_loadable(path: Path, err: BaseException, again: bool = False) -> ValueError:
    """The error for an exported file that cannot be read: it names the file and the cause.

    Example
    -------
    >>> str(not_loadable(Path("m-raw.onnx"), EOFError("cut"), again=True))  # doctest: +ELLIPSIS
    'm-raw.onnx: not a loadable ONNX model (EOFError: cut) even after exporting it again; ...'
    """
    cause = " ".join(str(err).split())[:200]  # one line
    return ValueError(f"{path}: not a loadable ONNX model ({type(err).__name__}: {cause})"
                      f"{' even after exporting it again' if again else ''}; delete it and it "
                      f"is exported again")


def read_or_rebuild(read: Callable, source: Path, rebuild: Callable | None):
    """``read()``, which reads the file ``source``; when that fails (a cut, empty or foreign
    file), ``rebuild()`` makes ``source`` again and ``read()`` runs once more. ``rebuild`` is
    None when ``source`` was made just now: its failure is reported at once. A failure that is
    not about the file (``ImportError``, ``MemoryError``) propagates as it is.

    Raises
    ------
    ValueError
        ``read()`` failed on a file made afresh (:func:`not_loadable`, naming ``source``).

    Example
    -------
    >>> made = []
    >>> def read():
    ...     if not made:
    ...         raise EOFError("cut")
    ...     return "graph"
    >>> read_or_rebuild(read, Path("m.onnx"), lambda: made.append(1)), made
    ('graph', [1])
    """
    try:
        return read()
    except _NOT_THE_FILE:
        raise
    except Exception as err:  # noqa: BLE001 - protobuf, onnx and onnxruntime raise their own
        if rebuild is None:
            raise not_loadable(source, err) from err
    rebuild()
    try:
        return read()
    except _NOT_THE_FILE:
        raise
    except Exception as err:  # noqa: BLE001 - as above
        raise not_loadable(source, err, again=True) from err


def fuse(raw: Path, fp32: Path, rebuild_raw: Callable | None) -> None:
    """Write ONNX Runtime's BERT fusions (attention, GELU, layer norm) of the graph ``raw``
    to ``fp32``; a ``raw`` that cannot be read is exported again once (:func:`read_or_rebuild`)."""
    from onnxruntime.transformers.optimizer import optimize_model
    fused = read_or_rebuild(lambda: optimize_model(str(raw), model_type="bert", num_heads=12,
                                                   hidden_size=384, opt_level=1),
                            raw, rebuild_raw)
    with atomic_write(fp32) as tmp:
        fused.save_model_to_file(str(tmp))


def quantize(fp32: Path, int8: Path, weight_type: str, rebuild_fp32: Callable | None) -> None:
    """Write the dynamic quantization of ``fp32`` to ``int8``: per-channel 8-bit weights
    (``weight_type`` ``"s8"`` or ``"u8"``) of the matrix products and fused attention only
    (embeddings and layer norms stay fp32: mean cosine >= 0.99 to fp32 on real texts). An
    ``fp32`` file that cannot be read is made again once (:func:`read_or_rebuild`)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    read_or_rebuild(lambda: onnx.load(str(fp32)), fp32, rebuild_fp32)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quiets its "consider pre-processing" root-logger advice
    try:
        with atomic_write(int8) as tmp:
            quantize_dynamic(str(fp32), str(tmp), per_channel=True,
                             op_types_to_quantize=["MatMul", "Attention"],
                             weight_type=QuantType.QInt8 if weight_type == "s8"
                             else QuantType.QUInt8,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    finally:
        root.setLevel(level)


def discard(path: Path) -> bool:
    """Remove an exported file an inference session could not load, so that the next export
    makes it again; a fused ``-fp32`` file takes its ``-raw`` graph with it (a graph cut where
    its file still parses fuses into the same unloadable model). Files already gone are fine
    (another process may have removed them first). False when they cannot be removed (a
    read-only cache folder): nothing can be exported there either."""
    try:
        path.unlink(missing_ok=True)
        if path.name.endswith("-fp32.onnx"):
            path.with_name(path.name[:-len("-fp32.onnx")] + "-raw.onnx").unlink(missing_ok=True)
    except OSError:
        return False
    return True
