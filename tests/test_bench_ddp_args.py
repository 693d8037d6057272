"""bench_ddp refuses sizes it cannot split before starting any process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("argv, message", [
    (["--queries", "5"], "--queries must be at least 20"),
    (["--queries", "-3"], "--queries must be at least 20"),
    (["--batch-size", "63"], "--batch-size must be even"),
    (["--seeds", "0"], "--seeds must be at least 1"),
])
def test_bench_ddp_rejects_bad_sizes(argv, message):
    sys.path.insert(0, str(BENCH))
    try:
        import bench_ddp
        with pytest.raises(SystemExit, match=message):
            bench_ddp.main(argv)
    finally:
        sys.path.remove(str(BENCH))


def test_bench_ddp_passes_the_size_to_the_data_config(monkeypatch, tmp_path):
    """The worker's LightningCLI arguments carry --queries as the simulator's n_queries."""
    sys.path.insert(0, str(BENCH))
    try:
        import bench_ddp
        seen = {}

        def fake_cli(args, run=False):
            seen["args"] = args
            raise RuntimeError("stop here")
        import recsys_router.lightning_cli as lc
        monkeypatch.setattr(lc, "build_lightning_cli", fake_cli)
        a = bench_ddp.argparse.Namespace(seed=1, batch_size=8, epochs=1, devices=1, queries=123,
                                         out_dir=str(tmp_path), out_json=str(tmp_path / "o.json"))
        with pytest.raises(RuntimeError, match="stop here"):
            bench_ddp._worker(a)
    finally:
        sys.path.remove(str(BENCH))
    opts = [x for x in seen["args"] if x.startswith("--data.init_args.dataset_options=")]
    assert opts == ['--data.init_args.dataset_options={"n_queries": 123, "n_llms": 8, '
                    '"n_topics": 6, "seed": 0}']
