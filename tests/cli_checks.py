"""A command line refused cleanly: exit status 2 and one error line (shared by the CLI tests)."""

from __future__ import annotations

import pytest

from recsys_router.cli import main

__all__ = ["fails_in_one_line"]


def fails_in_one_line(argv, capsys, *needles) -> str:
    """Run ``argv``; it must exit 2 with one error line holding every needle and no
    traceback. Returns that line."""
    with pytest.raises(SystemExit) as exc:  # argparse errors exit through SystemExit(2) ...
        rc = main(argv)
        raise SystemExit(rc)                # ... command errors return 2
    assert exc.value.code == 2
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if "error:" in x]
    assert len(line) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in line[0], line[0]
    return line[0]
