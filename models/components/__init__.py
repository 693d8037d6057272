"""Plain nn.Module building blocks."""
