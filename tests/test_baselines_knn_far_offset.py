"""Euclidean kNN far from the origin: |q|^2 + |t|^2 - 2 q.t lost the small gaps between
points near 1e6 to cancellation (the two nearest of four rows came out as [0, 1], not
[1, 2]); distances are now taken on rows centred on the training mean."""

import numpy as np

from recsys_router.models.baselines.neighbours import knn_indices


def test_euclidean_neighbours_near_a_large_offset():
    off = 1e6
    # training rows on a line, 0.01 apart; the query sits at 0.011 past row 0:
    # distances 0.011, 0.001, 0.009, 0.019 -> nearest rows 1, 2, then 0, then 3
    train = np.array([[off + 0.01 * i, off] for i in range(4)])
    query = np.array([[off + 0.011, off], [off + 0.029, off]])  # second: 0.001 from row 3
    got = knn_indices(query, train, 3, "euclidean")
    assert got.tolist() == [[1, 2, 0], [3, 2, 1]]


def test_euclidean_neighbours_small_gaps_at_1e4():
    off, step = 1e4, 1e-4
    train = np.array([[off + step * i] for i in range(4)])
    got = knn_indices(np.array([[off + 1.1 * step]]), train, 2, "euclidean")
    assert got.tolist() == [[1, 2]]        # distances 1.1e-4, 0.1e-4, 0.9e-4, 1.9e-4
