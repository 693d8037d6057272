"""fit/validate/test/predict: a refused argument (a wrong type, a value a constructor refuses,
an unknown key, a class_path outside the project) is one error line naming the argument, exit 2;
a foreign class_path is refused before its module is imported; a bug stays a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from recsys_router.cli import main
from recsys_router.errors import ConfigArgumentError

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
BASE = ["-c", str(ROOT / "configs" / "models" / "mf.yaml"),
        "-c", str(ROOT / "configs" / "data" / "synthetic.yaml"),
        "--data.init_args.dataset_options={n_queries: 40, n_llms: 3, n_topics: 2, seed: 0}",
        "--data.init_args.encoder_options={dim: 16}", "--trainer.accelerator=cpu",
        "--trainer.fast_dev_run=true", "--trainer.logger=false"]

CASES = [  # (argument, the argument the line names, what it says)
    ("--data.init_args.val_fraction=2", "--data.init_args.val_fraction",
     "val_fraction must be in [0, 1), got 2.0"),
    ("--data.init_args.mode=bogus", "--data.init_args.mode",
     "mode must be one of ('pointwise', 'listwise', 'pairwise'), got 'bogus'"),
    ("--data.init_args.batch_size=-1", "--data.init_args.batch_size",
     "batch_size must be >= 1, got -1"),
    ("--data.init_args.batch_size=abc", "--data.init_args.batch_size", "expected int, got 'abc'"),
    ("--data.init_args.no_such_key=1", "--data.init_args.no_such_key", "no such argument"),
    ("--model.init_args.dim=abc", "--model.init_args.dim", "expected int, got 'abc'"),
    ("--model.init_args.dropout=5", "--model.init_args.dropout",
     "dropout must be a finite number in [0, 1), got 5.0"),
    ("--model.init_args.loss.init_args.kind=bogus", "--model.init_args.loss.init_args.kind",
     "loss kind must be one of ('bce', 'mse', 'listwise', 'bpr', 'utility'), got 'bogus'"),
    ("--trainer.max_epochs=abc", "--trainer.max_epochs", "expected int, got 'abc'"),
    ("--model.init_args.loss.init_args.logit_adjust=nan",
     "--model.init_args.loss.init_args.logit_adjust", "logit_adjust must be a finite number, got 'nan'"),
    ("--model.init_args.loss.init_args.ipw_clip=inf", "--model.init_args.loss.init_args.ipw_clip",
     "ipw_clip must be a finite number >= 1 or None, got 'inf'"),
    ("--model.init_args.loss.init_args.selection_ratio=1.5",
     "--model.init_args.loss.init_args.selection_ratio",
     "selection_ratio must be a finite number in (0, 1], got 1.5"),
    # these parsed and failed mid-fit as tracebacks naming no argument (or, for
    # max_pairs_per_query=0, as "pairwise mode found no query with two different ... scores")
    ("--data.init_args.num_workers=-1", "--data.init_args.num_workers",
     "num_workers must be an integer >= 0, got -1"),
    ("--data.init_args.max_pairs_per_query=-1", "--data.init_args.max_pairs_per_query",
     "max_pairs_per_query must be an integer >= 1 or None, got -1"),
    ("--data.init_args.max_pairs_per_query=0", "--data.init_args.max_pairs_per_query",
     "max_pairs_per_query must be an integer >= 1 or None, got 0"),
    ("--data.init_args.propensity_clip=-1", "--data.init_args.propensity_clip",
     "propensity_clip must be a finite number in (0, 1], got -1.0"),
    ("--data.init_args.dataset_options.bogus=1", "--data.init_args.dataset_options",
     "no such dataset_options key(s) ['bogus'] for dataset 'synthetic'; its options: "
     "['binary', 'n_llms', 'n_queries', 'n_topics', 'seed', 'shared_vocab', 'specialisation', "
     "'task_difficulty', 'topic_vocab', 'with_text', 'words_per_query']"),
]
DATA_OPTION_CASES = [  # dataset options are checked by the loader: the line names the option
    ("--data.init_args.dataset_options.n_queries=-5", "n_queries must be an integer >= 1, got -5"),
    ("--data.init_args.dataset_options.specialisation=nan",
     "dataset option 'specialisation' must be a finite float, got 'nan'"),
]


def _one_error_line(capsys, command="fit") -> str:
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err and "usage:" not in out.err
    lines = [line for line in out.err.splitlines() if line.strip()
             and not line.startswith("Seed set")]
    assert len(lines) == 1, out.err
    assert lines[0].startswith(f"recsys-router {command}: error: ")
    return lines[0][len(f"recsys-router {command}: error: "):]


@pytest.mark.parametrize("arg,argument,says", CASES, ids=[c[0].split("=")[0] for c in CASES])
def test_a_refused_argument_is_one_line_naming_it_exit_2(arg, argument, says, capsys):
    assert main(["fit", *BASE, arg]) == 2
    assert _one_error_line(capsys) == f"{argument}: {says}"


@pytest.mark.parametrize("arg,says", DATA_OPTION_CASES,
                         ids=[c[0].split("=")[0].rsplit(".", 1)[1] for c in DATA_OPTION_CASES])
def test_a_refused_dataset_option_is_one_line_without_the_debug_hint(arg, says, capsys):
    """A negative size was a plain ValueError (with the --debug hint); 'nan' trained silently
    on all-zero scores."""
    assert main(["fit", *BASE, arg]) == 2
    assert _one_error_line(capsys) == says


def test_other_lightning_commands_and_unknown_flags_too(capsys):
    assert main(["validate", *BASE, "--data.init_args.batch_size=0"]) == 2
    assert _one_error_line(capsys, "validate") == \
        "--data.init_args.batch_size: batch_size must be >= 1, got 0"
    assert main(["fit", *BASE, "--no_such_flag=1"]) == 2
    assert _one_error_line(capsys) == "unrecognized arguments: --no_such_flag=1"


def _evil_module(tmp_path, monkeypatch) -> Path:
    """A module on sys.path that leaves a file behind when imported."""
    (tmp_path / "evil_cfg_mod.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('imported').touch()\n"
        "class Evil:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "imported"


@pytest.mark.parametrize("section,class_path,argument", [
    ("model:\n  class_path: {}\n", "evil_cfg_mod.Evil", "--model"),
    ("model:\n  class_path: {}\n", "os.system", "--model"),
    ("model:\n  class_path: {}\n", "subprocess.Popen", "--model"),
    ("data:\n  class_path: {}\n", "subprocess.Popen", "--data"),
    ("model:\n  init_args:\n    loss:\n      class_path: {}\n", "evil_cfg_mod.Evil",
     "--model.init_args.loss"),
], ids=["module-model", "os.system", "Popen-model", "Popen-data", "module-loss"])
def test_a_class_path_outside_the_project_is_refused_before_any_import(
        section, class_path, argument, tmp_path, monkeypatch, capsys):
    marker = _evil_module(tmp_path, monkeypatch)
    cfg = tmp_path / "hostile.yaml"
    cfg.write_text(section.format(class_path))
    assert main(["fit", *BASE, "-c", str(cfg)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"{argument}: class_path '{class_path}' is refused: a class_path may "
                           "only name a class under recsys_router, "), line
    assert "evil_cfg_mod" not in sys.modules and not marker.exists()


def test_a_foreign_class_path_as_an_argument_is_refused_too(tmp_path, monkeypatch, capsys):
    marker = _evil_module(tmp_path, monkeypatch)
    assert main(["fit", *BASE, "--model.init_args.loss=evil_cfg_mod.Evil"]) == 2
    assert _one_error_line(capsys).startswith(
        "--model.init_args.loss: class_path 'evil_cfg_mod.Evil' is refused")
    assert "evil_cfg_mod" not in sys.modules and not marker.exists()


@pytest.mark.parametrize("class_path", ["evil_cfg_mod.Evil", "subprocess.Popen", "os.system"])
def test_a_foreign_loss_class_path_flag_is_the_same_refusal_as_in_yaml(
        class_path, tmp_path, monkeypatch, capsys):
    """``--model.init_args.loss.class_path=...`` was refused as ``--model: 'NoneType' object
    has no attribute 'get'``; it is now the line a YAML config's loss gets."""
    marker = _evil_module(tmp_path, monkeypatch)
    assert main(["fit", *BASE, f"--model.init_args.loss.class_path={class_path}"]) == 2
    assert _one_error_line(capsys) == (
        f"--model.init_args.loss: class_path '{class_path}' is refused: a class_path may only "
        "name a class under recsys_router, pytorch_lightning, lightning.pytorch, "
        "lightning_fabric, lightning.fabric, torch.optim (nothing was imported)")
    assert "evil_cfg_mod" not in sys.modules and not marker.exists()


def test_debug_re_raises_with_the_constructors_error_in_the_chain():
    with pytest.raises(ConfigArgumentError, match=r"^--data\.init_args\.val_fraction: ") as info:
        main(["--debug", "fit", *BASE, "--data.init_args.val_fraction=2"])
    causes, exc = [], info.value
    while exc is not None:
        causes.append(str(exc))
        exc = exc.__cause__
    assert causes[-1] == "val_fraction must be in [0, 1), got 2.0"


def test_a_bug_in_a_constructor_stays_a_traceback(monkeypatch, capsys):
    """Not a ValueError: not an argument error, so not one line."""
    from recsys_router.datamodules.routing_datamodule import RoutingDataModule

    def broken(self, *args, **kwargs):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr(RoutingDataModule, "save_hyperparameters", broken)
    with pytest.raises(Exception) as info:
        main(["fit", *BASE])
    exc, kinds = info.value, []
    while exc is not None:
        kinds.append(type(exc))
        exc = exc.__cause__ or exc.__context__
    assert ZeroDivisionError in kinds and ConfigArgumentError not in kinds
    assert "error:" not in capsys.readouterr().err


def test_help_and_print_config_still_work(capsys):
    with pytest.raises(SystemExit) as info:
        main(["fit", "--help"])
    assert info.value.code == 0 and "--data.help" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["fit", *BASE, "--print_config"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert "class_path: recsys_router.models.mf_module.MFModule" in out
    assert "class_path: recsys_router.datamodules.routing_datamodule.RoutingDataModule" in out


def test_tuning_reports_a_refused_trial_argument_as_a_tuning_config_error(tmp_path):
    """The tuning objective builds the router CLI per trial: a refused argument (which
    LightningCLI used to print and exit on) is its TuningConfigError, naming the argument."""
    from recsys_router.tuning.objective import LightningObjective, TuningConfigError
    from recsys_router.tuning.space import SearchSpace
    configs = [BASE[1], BASE[3]]
    objective = LightningObjective(configs, SearchSpace([]), "val/mu_o", tmp_path)
    with pytest.raises(TuningConfigError, match=r"rejected the trial arguments .*: "
                                                r"--data\.init_args\.batch_size: expected int, "
                                                r"got 'abc'$"):
        objective._build(["-c", configs[0], "-c", configs[1], "--data.init_args.batch_size=abc"])


def test_a_value_error_bug_in_instantiation_keeps_a_debug_hint(monkeypatch, capsys):
    """A ValueError that no constructor check raised (here numpy's, from a bug in the data
    module's constructor) is not reported as a plain argument refusal: its line says to rerun
    with --debug, and --debug shows numpy's error in the chain; a check's refusal has no hint."""
    import numpy as np

    from recsys_router.datamodules.routing_datamodule import RoutingDataModule
    from recsys_router.errors import ArgumentValueError
    from recsys_router.hyperparams import check_number
    with pytest.raises(ArgumentValueError):
        check_number(-1, "lr", low=0)
    original = RoutingDataModule.__init__

    def buggy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        np.zeros(3) + np.zeros(4)  # a bug: operands could not be broadcast
    monkeypatch.setattr(RoutingDataModule, "__init__", buggy)
    assert main(["fit", *BASE]) == 2
    line = _one_error_line(capsys)
    assert line.endswith("(rerun with --debug for the traceback)"), line
    assert "operands could not be broadcast" in line
    with pytest.raises(ConfigArgumentError) as info:
        main(["--debug", "fit", *BASE])
    exc, inner = info.value, None
    while exc is not None:
        inner, exc = exc, exc.__cause__ or exc.__context__
    assert type(inner) is ValueError and "broadcast" in str(inner)
    monkeypatch.setattr(RoutingDataModule, "__init__", original)
    assert main(["fit", *BASE, "--data.init_args.val_fraction=2"]) == 2
    assert _one_error_line(capsys) == ("--data.init_args.val_fraction: val_fraction must be in "
                                       "[0, 1), got 2.0")


@pytest.mark.parametrize("model,arg,says", [
    ("nirt", "--model.init_args.dropout=-0.1",
     "--model.init_args.dropout: dropout must be a finite number in [0, 1), got -0.1"),
    ("nirt", "--model.init_args.hidden=[0]", "--model.init_args.hidden: hidden (each layer "
     "width) must be an integer in [1, 65536], got 0"),
    ("two_tower", "--model.init_args.id_dim=0",
     "--model.init_args.id_dim: id_dim must be an integer in [1, 65536], got 0"),
], ids=["nirt_dropout", "nirt_hidden", "two_tower_id_dim"])
def test_a_refused_nirt_or_two_tower_size_is_one_line_without_the_debug_hint(model, arg, says,
                                                                            capsys):
    """NIRT dropout=-0.1 was torch's ValueError with the --debug hint; NIRT hidden=[0] and
    two-tower id_dim=0 trained."""
    config = ["-c", str(ROOT / "configs" / "models" / f"{model}.yaml"), *BASE[2:]]
    assert main(["fit", *config, arg]) == 2
    assert _one_error_line(capsys) == says


@pytest.mark.parametrize("args,argument,given,data", [
    (["--model.init_args.n_llms=5"], "n_llms", 5, 3),
    (["--model.init_args.embed_dim=17"], "embed_dim", 17, 16),
    (["--model.init_args.n_llms=3", "--model.init_args.embed_dim=8"], "embed_dim", 8, 16),
], ids=["n_llms", "embed_dim", "equal_n_llms_other_width"])
def test_a_linked_size_that_contradicts_the_data_is_one_line(args, argument, given, data, capsys):
    """n_llms / embed_dim are linked from the data (3 LLMs, 16-dim hashing here): a given value
    was replaced without a word; now it is refused naming the option and both values."""
    assert main(["fit", *BASE, *args]) == 2
    assert _one_error_line(capsys) == (
        f"--model.init_args.{argument}: {given} differs from the data's {argument} {data}: "
        f"{argument} is linked from the data module (data.{argument}); leave it out")


def test_linked_sizes_in_a_yaml_are_checked_and_equal_ones_pass(tmp_path, capsys):
    from recsys_router.lightning_cli import build_lightning_cli
    wrong = tmp_path / "sizes.yaml"
    wrong.write_text("model:\n  init_args:\n    n_llms: 8\n    embed_dim: 256\n")
    assert main(["fit", *BASE, "-c", str(wrong)]) == 2
    assert _one_error_line(capsys) == (
        "--model.init_args.n_llms: 8 differs from the data's n_llms 3: n_llms is linked from "
        "the data module (data.n_llms); leave it out")
    same = tmp_path / "same.yaml"
    same.write_text("model:\n  init_args:\n    n_llms: 3\n    embed_dim: 16\n")
    cli = build_lightning_cli(["fit", *BASE, "-c", str(same)])
    assert (cli.model.hparams.n_llms, cli.model.hparams.embed_dim) == (3, 16)
    assert cli.trainer.state.finished


# the loss kinds each training-batch layout trains (RoutingLoss.forward raises on the others)
TRAINS = {"pointwise": {"bce", "mse"}, "pairwise": {"bpr"},
          "listwise": {"bce", "mse", "listwise", "bpr", "utility"}, "ips": {"bce", "mse"}}
KINDS = ("bce", "mse", "listwise", "bpr", "utility")


@pytest.mark.parametrize("layout,kind", [(m, k) for m in TRAINS for k in KINDS])
def test_a_loss_kind_the_data_mode_cannot_train_is_refused_before_training(layout, kind, capsys):
    """Refused when the config is read, one line (was a 129-line traceback from inside
    training_step, exit 1); every other pair trains."""
    if layout == "ips":  # logged feedback, simulated from the full matrix
        data = ["--data.init_args.feedback=ips", "--data.init_args.logging_policy=uniform"]
    else:
        data = [f"--data.init_args.mode={layout}"]
    args = ["fit", *BASE, *data, f"--model.init_args.loss.init_args.kind={kind}"]
    if kind in TRAINS[layout]:
        assert main(args) == 0
        return
    assert main(args) == 2
    if layout == "ips":
        says = (f"logged feedback (data.init_args.feedback='ips') trains with loss kind 'bce' "
                f"or 'mse', but the model's loss kind is {kind!r}: set "
                "model.init_args.loss.init_args.kind")
    else:
        allowed = ", ".join(repr(k) for k in KINDS if k in TRAINS[layout])
        default = {"bce": "pointwise", "mse": "pointwise", "bpr": "pairwise"}.get(kind, "listwise")
        says = (f"the data module's mode {layout!r} cannot train the model's loss kind {kind!r} "
                f"(that mode trains {allowed}): set data.init_args.mode={default!r} or another "
                "model.init_args.loss.init_args.kind")
    assert _one_error_line(capsys) == says
