"""Exported routers: data-only artifacts (format 2), loading with verification, calibration."""

from __future__ import annotations

from .artifact import (FORMAT_VERSION, LIMITS, ArtifactError, ExportedRouter, data_fingerprint,
                       export_router, load_router, set_default_policy, verify_artifact)
from .build import BuiltRouter, build_router, seed_everything
from .calibrate import calibrate_artifact, calibrate_policy, candidate_values
from .evaluate import heldout_metrics

__all__ = ["FORMAT_VERSION", "LIMITS", "ArtifactError", "ExportedRouter", "export_router",
           "load_router", "verify_artifact", "set_default_policy", "data_fingerprint",
           "calibrate_policy", "candidate_values", "heldout_metrics", "calibrate_artifact",
           "build_router", "BuiltRouter", "seed_everything"]
