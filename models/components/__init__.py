"""Plain nn.Module building blocks."""

from .mlp import MLP, LinearProjection

__all__ = ["MLP", "LinearProjection"]
