"""Torch networks as declared state: the architecture comes from JSON hyperparameters
(the owning router builds the network), the weights from validated arrays.

:func:`module_arrays` returns a module's ``state_dict`` as numpy arrays;
:func:`load_module_arrays` builds the module first on PyTorch's ``meta`` device (no memory
is allocated, so sizes read from an artifact cannot ask for a huge network), checks that
the stored names, dtypes and shapes are exactly the module's own, and only then builds it
for real and copies the arrays in. Buffers a module lists
in ``_growable_buffers_`` (e.g. vectors of LLMs added after training) may differ in their
first axis; they are resized to the stored size first.

Example
-------
>>> import torch
>>> net = torch.nn.Linear(2, 3)
>>> back = load_module_arrays(lambda: torch.nn.Linear(2, 3), module_arrays(net), "net")
>>> bool(torch.equal(back.weight, net.weight))
True
"""

from __future__ import annotations

import numpy as np

from . import StateError

__all__ = ["module_arrays", "load_module_arrays"]


def module_arrays(net) -> dict[str, np.ndarray]:
    """``state_dict`` of ``net`` as contiguous numpy arrays (CPU copies)."""
    return {k: np.ascontiguousarray(v.detach().cpu().numpy()) for k, v in net.state_dict().items()}


def _grow(net, arrays: dict, where: str) -> None:
    import torch
    for mod_name, mod in net.named_modules():
        for buf in getattr(mod, "_growable_buffers_", ()):
            key = f"{mod_name}.{buf}" if mod_name else buf
            cur = getattr(mod, buf, None)
            if key not in arrays or cur is None:
                continue
            shape = tuple(arrays[key].shape)
            if shape != tuple(cur.shape):
                if shape[1:] != tuple(cur.shape[1:]) or shape[0] > 1_000_000:
                    raise StateError(f"{where}: {key} has shape {shape}, expected (n, "
                                     f"{', '.join(map(str, cur.shape[1:]))})")
                setattr(mod, buf, torch.zeros(shape, dtype=cur.dtype))


def _check(own: dict, arrays: dict, where: str) -> None:
    if set(own) != set(arrays):
        diff = sorted(set(own) ^ set(arrays))
        raise StateError(f"{where}: network weights {diff[:5]} missing or not expected")
    for k, t in own.items():
        a = arrays[k]
        want = str(t.dtype).replace("torch.", "")
        if a.dtype.name != want or tuple(a.shape) != tuple(t.shape):
            raise StateError(f"{where}: {k} is {a.dtype.name}{list(a.shape)}, the network "
                             f"expects {want}{list(t.shape)}")


def load_module_arrays(build, arrays: dict, where: str):
    """Build a network with ``build()`` and load validated arrays into it.

    Parameters
    ----------
    build : callable
        ``() -> nn.Module`` building an untrained network (from trusted hyperparameters).
    arrays : dict
        ``state_dict`` name -> ndarray.
    where : str
        Name used in error messages.

    Returns
    -------
    nn.Module
        The network with the stored weights.

    Raises
    ------
    StateError
        Missing or extra keys, another dtype or shape (checked before any allocation).
    """
    import torch
    with torch.device("meta"):
        probe = build()
    _grow(probe, arrays, where)
    _check(probe.state_dict(), arrays, where)
    net = build()
    _grow(net, arrays, where)
    net.load_state_dict({k: torch.from_numpy(np.array(a, copy=True)) for k, a in arrays.items()},
                        strict=True)
    return net
