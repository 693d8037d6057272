"""``recsys-router fit|validate|test|predict``: the router LightningCLI
(:mod:`recsys_router.lightning_cli`) on the command line.

Examples
--------
recsys-router fit -c configs/models/mf.yaml -c configs/data/routerbench_zs.yaml
recsys-router test -c configs/models/mf.yaml -c configs/data/routerbench_zs.yaml \\
    --ckpt_path lightning_logs/version_0/checkpoints/last.ckpt
recsys-router fit -c configs/models/two_tower.yaml -c configs/data/synthetic.yaml \\
    --trainer.strategy=ddp --trainer.devices=2 --trainer.accelerator=cpu
"""

from __future__ import annotations

import sys

from recsys_router.lightning_cli import build_lightning_cli

__all__ = ["run_lightning_cli"]


def run_lightning_cli(argv: list[str]) -> int:
    """Entry point used by ``recsys-router`` for ``fit``/``validate``/``test``/``predict``.

    Parameters
    ----------
    argv : list of str
        Starts with the sub-command, e.g. ``["fit", "-c", "configs/models/mf.yaml", ...]``.

    Returns
    -------
    int
        Exit status (0 on success; argument errors exit through jsonargparse).
    """
    argv = list(argv)
    # when argv is the process's own command line, let LightningCLI read sys.argv itself
    # (passing both makes it warn)
    build_lightning_cli(None if argv == sys.argv[1:] else argv, run=True)
    return 0


if __name__ == "__main__":  # `python -m recsys_router.cli.lightning fit ...` (DDP re-launch)
    sys.exit(run_lightning_cli(sys.argv[1:]))
