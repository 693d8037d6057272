"""Hostile ``--ckpt_path`` values of ``recsys-router fit|validate|test|predict``: a checkpoint is
read as plain data only, so every value that Lightning would fetch, resolve or open itself
instead of the local file the router CLI checked is refused as one error line naming
``--ckpt_path`` (exit 2) before anything is read, and Lightning's own read of a checked file
never unpickles code. Each payload, if it were ever unpickled, would create a marker folder."""

from __future__ import annotations

import functools
import http.server
import os
import pickle
import threading
from pathlib import Path

import pytest
import torch

from recsys_router.cli import main
from recsys_router.lightning_cli import build_lightning_cli

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
ACCEPTED = ("only a local checkpoint file is accepted (e.g. "
            "lightning_logs/version_0/checkpoints/last.ckpt)")


class _Payload:
    """Unpickling this creates the marker folder (a stand-in for any code a file runs)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def _base(tmp_path) -> list[str]:
    return ["-c", str(ROOT / "configs" / "models" / "mf.yaml"),
            "-c", str(ROOT / "configs" / "data" / "synthetic.yaml"),
            "--data.init_args.dataset_options={n_queries: 80, n_llms: 4, n_topics: 3, seed: 0}",
            "--data.init_args.encoder_options={dim: 16}", "--trainer.logger=false",
            f"--trainer.default_root_dir={tmp_path}", f"--checkpoint.dirpath={tmp_path}/ck",
            "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]


def _refused(capsys, command: str, argv: list[str]) -> str:
    """Run ``recsys-router COMMAND argv``: exit 2 and one error line; that line's message."""
    capsys.readouterr()
    assert main([command, *argv]) == 2
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    assert len(lines) == 1, out.err
    prefix = f"recsys-router {command}: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


@pytest.fixture()
def evil_bytes(tmp_path):
    """(the bytes of a checkpoint holding the payload, its marker)."""
    marker = tmp_path / "PAYLOAD_RAN"
    path = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {}, "evil": _Payload(marker)}, path)
    return path.read_bytes(), marker


@pytest.mark.parametrize("command", ["predict", "fit"])
def test_an_http_url_is_refused_before_anything_is_fetched(command, tmp_path, evil_bytes, capsys,
                                                            monkeypatch):
    """The reported case: Lightning downloads an ``http(s)`` checkpoint and unpickles it in
    full (weights_only=False for remote files); the payload ran, then a KeyError. Now: one
    line, and the server is never asked."""
    data, marker = evil_bytes
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "evil.ckpt").write_bytes(data)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(args)

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(tmp_path / "www")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/evil.ckpt"
    try:
        message = _refused(capsys, command, [*_base(tmp_path), f"--ckpt_path={url}"])
    finally:
        server.shutdown()
        server.server_close()
    assert message == f"--ckpt_path: {url!r} is a URL or fsspec path: {ACCEPTED}"
    assert not marker.exists() and requests == []


@pytest.mark.parametrize("scheme", ["memory", "file", "simplecache::file"])
def test_fsspec_paths_are_refused(scheme, tmp_path, evil_bytes, capsys):
    """``memory://``, ``file://`` and chained fsspec paths: Lightning opens them through fsspec,
    past the local-file check (which read nothing: the path is no local file)."""
    import fsspec
    data, marker = evil_bytes
    if scheme == "memory":
        mem = fsspec.filesystem("memory")
        mem.pipe("/recsys-probe/evil.ckpt", data)
        value = "memory://recsys-probe/evil.ckpt"
    else:
        (tmp_path / "evil.ckpt").write_bytes(data)
        value = f"{scheme}://{tmp_path / 'evil.ckpt'}"
    try:
        message = _refused(capsys, "test", [*_base(tmp_path), f"--ckpt_path={value}"])
    finally:
        if scheme == "memory":
            mem.rm("/recsys-probe", recursive=True)
    assert message == f"--ckpt_path: {value!r} is a URL or fsspec path: {ACCEPTED}"
    assert not marker.exists()


@pytest.mark.parametrize("keyword", ["last", "best", "hpc", "registry", "registry:mf:v1"])
def test_lightning_keywords_are_refused(keyword, tmp_path, capsys):
    """Lightning resolves these itself (``last`` in a fresh CLI found nothing and trained from
    scratch with a warning); the documented workflow names the file instead."""
    message = _refused(capsys, "fit", [*_base(tmp_path), f"--ckpt_path={keyword}"])
    assert message == (f"--ckpt_path: {keyword!r} is a Lightning keyword, which picks a "
                       f"checkpoint no check reads: {ACCEPTED} (./{keyword} for a file of that "
                       "name)")
    assert not (tmp_path / "ck").exists()  # nothing trained


def test_a_missing_file_and_a_folder_are_one_line(tmp_path, capsys):
    for value in (tmp_path / "nowhere.ckpt", tmp_path):
        message = _refused(capsys, "validate", [*_base(tmp_path), f"--ckpt_path={value}"])
        assert message == f"--ckpt_path: {str(value)!r}: no such file; {ACCEPTED}"


def test_a_path_fsspec_reads_as_another_file_is_refused(tmp_path, evil_bytes, capsys,
                                                        monkeypatch):
    """``~/x.ckpt`` is the file ``./~/x.ckpt`` here but ``$HOME/x.ckpt`` to fsspec, which
    Lightning opens it with: the checked file would not be the one loaded."""
    data, marker = evil_bytes
    work, home = tmp_path / "work", tmp_path / "home"
    (work / "~").mkdir(parents=True)
    home.mkdir()
    torch.save({"hyper_parameters": {}}, work / "~" / "x.ckpt")
    (home / "x.ckpt").write_bytes(data)
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    message = _refused(capsys, "test", [*_base(tmp_path), "--ckpt_path=~/x.ckpt"])
    assert message == ("--ckpt_path: '~/x.ckpt' would be opened as another file than the one "
                       f"checked: {ACCEPTED}")
    assert not marker.exists()


def test_weights_only_false_is_refused(tmp_path, capsys):
    message = _refused(capsys, "test", [*_base(tmp_path), "--weights_only=false"])
    assert message == ("--weights_only: false is refused: --ckpt_path checkpoints are read as "
                       "plain data only (weights_only=True, as fit writes them)")


def test_lightnings_own_read_is_plain_data_even_if_the_file_changes_after_its_check(
        tmp_path, capsys, monkeypatch):
    """A checked checkpoint replaced by a pickle of code before Lightning reads it, with
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (torch's switch for calls that do not say
    ``weights_only``): Lightning is told ``weights_only=True``, so the payload never runs (it
    did: Lightning passed None)."""
    import recsys_router.lightning_cli as lcli
    build_lightning_cli(["fit", *_base(tmp_path), "--trainer.max_epochs=1"])
    ckpt = tmp_path / "ck" / "last.ckpt"
    raw = torch.load(ckpt, map_location="cpu", weights_only=True)
    marker = tmp_path / "PAYLOAD_RAN"
    checked = lcli._check_ckpt_model_class

    def check_then_swap(*args):
        checked(*args)
        torch.save({**raw, "evil": _Payload(marker)}, ckpt)
    monkeypatch.setattr(lcli, "_check_ckpt_model_class", check_then_swap)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        build_lightning_cli(["test", *_base(tmp_path), f"--ckpt_path={ckpt}"])
    assert not marker.exists()
