"""datamodules package."""
