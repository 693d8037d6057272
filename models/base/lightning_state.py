"""Declared state of the Lightning routers: encoder, network weights and training record.

The network is not described by the artifact: the router rebuilds it from its own
(JSON) hyperparameters through ``build_module(n_llms, embed_dim)`` and only copies the
stored ``state_dict`` arrays into it, after checking that their names, dtypes and shapes
are exactly the network's (:func:`~recsys_router.state.nets.load_module_arrays`).
``n_llms`` is the pool the network was built for; LLMs added later (cold start) live in
buffers the network declares growable, and in the per-LLM arrays of the router.

Reference: the ``state_dict`` / ``load_state_dict`` contract of PyTorch modules (Paszke
et al., "PyTorch: An Imperative Style, High-Performance Deep Learning Library", 2019).
"""

from __future__ import annotations

import numpy as np

from recsys_router.state import (FLOAT, INT, JSON_ANY, Arr, DictOf, Opt, Part, StateError,
                                 check_state)

__all__ = ["LightningStateMixin", "registered_module_paths"]

_NET = {"n_llms": INT, "embed_dim": INT}
_MAX_SIZE = 1_000_000


def registered_module_paths() -> set[str]:
    """``package.module.Class`` of the RouterModule of every registered Lightning router."""
    from recsys_router.registry import ROUTERS, router_class
    out = set()
    for name, _ in ROUTERS.items():
        try:
            cls = router_class(name)
        except (ImportError, TypeError):
            continue
        mod = getattr(cls, "_module_cls", None)
        if isinstance(cls, type) and issubclass(cls, LightningStateMixin) and mod is not None:
            out.add(f"{mod.__module__}.{mod.__name__}")
    return out


class LightningStateMixin:
    """``_get_state`` / ``_from_state`` for routers holding ``net_`` and an encoder."""

    _state_ = {"train_history_": DictOf(Opt(FLOAT), 1000), "best_step_": Opt(INT),
               "steps_": Opt(INT), "plan_": Opt(DictOf(JSON_ANY, 64)),
               "val_score_": Opt(FLOAT), "llm_feature_stats_": Opt(DictOf(Opt(FLOAT), 16)),
               "added_llm_rows_": Arr("float64", ("n_added", "row"), optional=True),
               "kept_cols_": Arr("int64", ("n_pool",), optional=True),
               "logit_calib_": Arr("float64", (2,), optional=True),
               "encoder_": Part(), "net_": Part(), "score_scale_": Part(optional=True)}

    @classmethod
    def _check_stored_params(cls, params: dict, where: str) -> None:
        """A stored ``module`` must name exactly the module of a registered Lightning
        router (nothing is imported by a name the artifact chose)."""
        if "module" not in params:
            return
        spec = params["module"]
        path = spec.get("class_path") if isinstance(spec, dict) else spec
        allowed = registered_module_paths()
        if not isinstance(path, str) or path.replace(":", ".") not in allowed:
            raise StateError(f"{where}.params.module: {str(path)[:120]!r} is not the module of a "
                             f"registered router ({', '.join(sorted(allowed))})")

    def _net_info(self) -> dict:
        """Sizes the network was built with: ``embed_dim`` and ``n_llms`` (the pool it was
        trained on; LLMs added or removed later live in ``added_llm_rows_``/``kept_cols_``)."""
        n = getattr(self, "net_n_llms_", None)
        if n is None:
            n = len(getattr(self, "core_llms_", None) or self.llm_names_) \
                if getattr(self, "kept_cols_", None) is None else None
        if n is None:
            raise StateError(f"{type(self).__name__}: the size of the trained pool is unknown")
        return {"n_llms": int(n), "embed_dim": int(self.encoder_.dim)}

    def _get_state(self):
        from recsys_router.encoders.state import save_encoder_part
        from recsys_router.state.nets import module_arrays
        fields, arrays = super()._get_state()
        info, enc_arrays = save_encoder_part("encoder_", self.encoder_)
        fields.update(info)
        fields["net_"] = self._net_info()
        scale = getattr(self, "score_scale_", None)
        fields["score_scale_"] = None if scale is None else scale.to_state()
        arrays.update(enc_arrays)
        arrays.update({f"net_/{k}": v for k, v in module_arrays(self.net_).items()})
        return fields, arrays

    def _build_net(self, info: dict, arrays: dict):
        """An untrained network of the stored sizes (the graph router overrides this)."""
        return self.build_module(info["n_llms"], info["embed_dim"]).net

    @classmethod
    def _from_state(cls, params, fields, arrays):
        from recsys_router.encoders.state import load_encoder_part
        from recsys_router.state.nets import load_module_arrays
        router = super()._from_state(params, fields, arrays)
        if router.llm_feature_stats_ is not None:
            router.llm_feature_stats_ = {k: (np.nan if v is None else v)
                                         for k, v in router.llm_feature_stats_.items()}
        router.train_history_ = {k: (np.nan if v is None else v)
                                 for k, v in router.train_history_.items()}
        if fields.get("score_scale_") is not None:  # checked field by field by ScoreScale
            from recsys_router.score_scale import ScoreScale
            router.score_scale_ = ScoreScale.from_state(fields["score_scale_"])
        enc = load_encoder_part("encoder_", fields, arrays, cls.__name__)
        router.fitted_encoder_ = enc
        info = check_state(_NET, fields["net_"], {}, {}, "net_.")
        if not (0 < info["n_llms"] <= _MAX_SIZE and 0 < info["embed_dim"] <= _MAX_SIZE):
            raise StateError(f"{cls.__name__}.net_: sizes {info} out of range")
        added = 0 if router.added_llm_rows_ is None else len(router.added_llm_rows_)
        kept = router.kept_cols_
        if kept is not None and len(kept) and (kept.min() < 0 or kept.max() >= info["n_llms"] + added):
            raise StateError(f"{cls.__name__}.kept_cols_: index out of range")
        if info["embed_dim"] != enc.dim:
            raise StateError(f"{cls.__name__}.net_: embed_dim {info['embed_dim']} differs from "
                             f"the encoder's dim {enc.dim}")
        calib = getattr(router, "logit_calib_", None)
        if calib is not None and not (np.isfinite(calib).all() and calib[0] > 0):
            raise StateError(f"{cls.__name__}.logit_calib_: expected finite [a, b] with a > 0")
        router.net_n_llms_ = info["n_llms"]
        net_arrays = {k[len("net_/"):]: v for k, v in arrays.items() if k.startswith("net_/")}
        net = load_module_arrays(lambda: router._build_net(info, arrays), net_arrays,
                                 f"{cls.__name__}.net_")
        router.net_ = net.cpu().eval()
        router._after_load(fields, arrays)
        return router

    def _after_load(self, fields: dict, arrays: dict) -> None:
        """Hook for routers with more state than the network (e.g. the graph)."""
