"""recsys_router.numeric.to_floats: integers past float range become +-inf, and every other
cell follows pd.to_numeric's rules even in a column that holds such an integer."""

import numpy as np
import pandas as pd

from recsys_router.numeric import to_floats


def test_cells_beside_a_huge_integer_parse_as_pd_to_numeric_does():
    cells = ["1_000", "\u0661\u0662", "2.5", " 12 ", "x", None]
    expect = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce").to_numpy(np.float64)
    got = to_floats(pd.Series(cells + [10**400, -10**400], dtype=object))
    np.testing.assert_array_equal(got[:-2], expect)   # '1_000' and Arabic-Indic digits: NaN
    assert got[-2:].tolist() == [np.inf, -np.inf]
