"""Personalized PageRank: hand-checked values, a dense linear-system reference, igraph."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from convrag.retrieval.graph.ppr import PPR, personalized_pagerank


def path3() -> sparse.csr_matrix:
    # 0 - 1 - 2, unit weights, undirected
    return sparse.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float))


def test_three_node_path_by_hand():
    # x = 0.5 P^T x + 0.5 r, r = e0:  x0 = x1/4 + 1/2, x1 = (x0 + x2)/2, x2 = x1/4
    # -> x1 = 4/7 x0, x0 = 7/12, x1 = 1/3, x2 = 1/12
    x = personalized_pagerank(path3(), np.array([1.0, 0.0, 0.0]), damping=0.5)
    assert x == pytest.approx([7 / 12, 1 / 3, 1 / 12], abs=1e-12)
    assert x.sum() == pytest.approx(1.0, abs=1e-15)


def test_reset_is_normalised_and_damping_zero_returns_it():
    x = personalized_pagerank(path3(), np.array([2.0, 0.0, 0.0]), damping=0.5)
    assert x == pytest.approx([7 / 12, 1 / 3, 1 / 12], abs=1e-12)
    assert personalized_pagerank(path3(), np.array([1.0, 3.0, 0.0]), damping=0.0) == pytest.approx([0.25, 0.75, 0.0])


def test_weights_steer_the_walk():
    # star 0-1 (weight 3), 0-2 (weight 1), reset on 0: node 1 gets 3x node 2's mass
    a = sparse.csr_matrix(np.array([[0, 3, 1], [3, 0, 0], [1, 0, 0]], dtype=float))
    x = personalized_pagerank(a, np.array([1.0, 0, 0]), damping=0.5)
    # x1 = 0.5 * 0.75 x0, x2 = 0.5 * 0.25 x0, x0 = 0.5 (x1 + x2) + 0.5 -> x0 = 2/3
    assert x == pytest.approx([2 / 3, 0.25, 1 / 12], abs=1e-12)


def dense_reference(w: np.ndarray, r: np.ndarray, d: float) -> np.ndarray:
    """Solve (I - d P^T) y = (1 - d) r with P = D^-1 W (zero rows for dangling nodes), normalise."""
    out = w.sum(axis=1)
    p = np.divide(w, out[:, None], out=np.zeros_like(w), where=out[:, None] > 0)
    y = np.linalg.solve(np.eye(len(w)) - d * p.T, (1 - d) * r / r.sum())
    return y / y.sum()


def random_graph(n: int, seed: int, symmetric: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.1, 2.0, size=(n, n)) * (rng.random((n, n)) < 0.3)
    np.fill_diagonal(w, 0)
    if symmetric:
        w = np.triu(w) + np.triu(w).T
    w[n - 1, :] = 0  # a dangling node (isolated when symmetric)
    if symmetric:
        w[:, n - 1] = 0
    return w


@pytest.mark.parametrize("damping", [0.5, 0.85, 0.15])
@pytest.mark.parametrize("symmetric", [True, False])
def test_matches_dense_solution_with_dangling_node(damping, symmetric):
    w = random_graph(12, seed=3, symmetric=symmetric)
    assert (w[11] == 0).all()
    rng = np.random.default_rng(7)
    r = rng.random(12) * (rng.random(12) < 0.5)
    r[11] = 0.4  # the dangling node is a seed too
    x = personalized_pagerank(sparse.csr_matrix(w), r, damping)
    ref = dense_reference(w, r, damping)
    assert np.abs(x - ref).max() < 1e-8
    assert x.sum() == pytest.approx(1.0, abs=1e-12)


def test_batched_columns_equal_single_runs():
    w = random_graph(15, seed=5)
    rng = np.random.default_rng(1)
    resets = rng.random((15, 4)) * (rng.random((15, 4)) < 0.4)
    resets[0] = 1.0  # no all-zero column
    g = PPR(sparse.csr_matrix(w))
    both = g.run(resets, 0.5)
    assert both.shape == (15, 4)
    for j in range(4):
        assert np.abs(both[:, j] - g.run(resets[:, j], 0.5)).max() < 1e-12
        assert np.abs(both[:, j] - dense_reference(w, resets[:, j], 0.5)).max() < 1e-8


def test_agrees_with_igraph_prpack():
    ig = pytest.importorskip("igraph")
    w = random_graph(20, seed=11)
    r = np.zeros(20)
    r[[0, 4, 19]] = [0.5, 0.2, 0.3]  # 19 is isolated
    iu = np.argwhere(np.triu(w) > 0)
    g = ig.Graph(n=20, edges=[tuple(map(int, e)) for e in iu], directed=False)
    g.es["weight"] = [float(w[i, j]) for i, j in iu]
    ref = np.array(g.personalized_pagerank(damping=0.5, directed=False, weights="weight", reset=r.tolist(),
                                           implementation="prpack"))
    x = personalized_pagerank(sparse.csr_matrix(w), r, 0.5)
    assert np.abs(x - ref).max() < 1e-8


def test_bad_input_is_named():
    a = path3()
    with pytest.raises(ValueError, match="reset has shape"):
        personalized_pagerank(a, np.ones(4))
    with pytest.raises(ValueError, match="all zero"):
        personalized_pagerank(a, np.zeros(3))
    with pytest.raises(ValueError, match="reset values must be finite and >= 0"):
        personalized_pagerank(a, np.array([1.0, -1.0, 0.0]))
    with pytest.raises(ValueError, match="damping must be in"):
        personalized_pagerank(a, np.ones(3), damping=1.0)
    with pytest.raises(ValueError, match="weights must be finite and >= 0"):
        personalized_pagerank(sparse.csr_matrix(np.array([[0, -1.0], [-1.0, 0]])), np.ones(2))
    with pytest.raises(ValueError, match="must be square"):
        personalized_pagerank(sparse.csr_matrix(np.ones((2, 3))), np.ones(2))
