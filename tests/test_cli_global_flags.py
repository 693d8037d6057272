"""The global flags reach the Lightning commands, and Ctrl-C during Lightning training is an
interrupt (exit 130, one message) rather than Lightning's ``sys.exit(1)``."""

from __future__ import annotations

import signal

import pytest

from recsys_router.cli import main


@pytest.mark.parametrize("flags", [["--debug"], ["-v"], ["--verbose", "--debug"]])
def test_global_flags_before_a_lightning_command(capsys, flags):
    with pytest.raises(SystemExit) as exc:  # LightningCLI's --help exits 0
        main(flags + ["fit", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr()
    assert "invalid choice" not in out.err and "--trainer" in out.out
    from recsys_router.cli import _split_global_flags
    assert _split_global_flags(flags + ["fit"])[1] == ["fit"]


def test_ctrl_c_during_lightning_training_exits_130(monkeypatch, capsys, tmp_path):
    import pytorch_lightning as pl
    import torch

    import recsys_router.cli.evaluate as cli_evaluate

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(1, 1)

        def training_step(self, batch, i):
            return self.w(batch[0]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class CtrlC(pl.Callback):  # what Ctrl-C raises in the training loop
        def on_train_batch_start(self, *args):
            raise KeyboardInterrupt

    def training_command(args):
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.ones(4, 1)), batch_size=2)
        pl.Trainer(max_epochs=1, callbacks=[CtrlC()], logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False,
                   default_root_dir=tmp_path).fit(Tiny(), loader)
        return 0

    monkeypatch.setattr(cli_evaluate, "run_evaluate", training_command)
    before = signal.getsignal(signal.SIGINT)
    rc = main(["evaluate", "--data", "synthetic", "--routers", "mf", "--out", str(tmp_path / "o")])
    assert rc == 130
    assert "recsys-router evaluate: interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is before  # Lightning's SIG_IGN is undone


def test_other_system_exits_pass_through(monkeypatch, tmp_path):
    import recsys_router.cli.evaluate as cli_evaluate

    def exits(args):
        raise SystemExit(3)
    monkeypatch.setattr(cli_evaluate, "run_evaluate", exits)
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--data", "synthetic", "--routers", "knn", "--out", str(tmp_path / "o")])
    assert exc.value.code == 3
