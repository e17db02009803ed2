"""Part 10 ("I drink hot coffee"): a Problem built from NumPy's default_rng(16), drawn as the page draws
them, reproduces every table printed on the page to 2 decimals."""
import numpy as np
import pytest

import worked

PAGE = {
    "Q": [[-1.34, 0.22, 0.52, 1.84, 0.13], [-1.31, -0.0, 0.06, 1.8, -0.25],
          [-2.35, 0.29, 0.78, 3.23, -0.07], [-1.19, 0.28, 0.3, 1.57, 1.13]],
    "K": [[0.26, 1.1, -0.37, -0.19, 0.99], [0.35, 1.04, -0.75, 0.58, 1.2],
          [0.36, 1.74, -0.89, 0.12, 1.98], [0.97, 2.08, 0.34, -1.37, -0.22]],
    "V": [[0.36, -0.33, 1.24, -0.77, 0.98], [0.02, -0.86, 1.44, -0.11, 0.66],
          [0.36, -0.95, 2.22, -0.95, 1.61], [1.29, 0.95, 1.3, -1.82, 0.94]],
    "scores": [[-0.52, 0.59, -0.11, -3.21], [-0.95, 0.24, -0.81, -3.67],
               [-1.25, 0.7, -0.79, -5.81], [0.7, 1.91, 2.2, -2.87]],
    "weights": [[0.24, 0.4, 0.29, 0.07], [0.25, 0.42, 0.26, 0.07],
                [0.21, 0.5, 0.26, 0.03], [0.21, 0.35, 0.4, 0.04]],
    "Z": [[0.29, -0.63, 1.61, -0.64, 1.03], [0.28, -0.62, 1.59, -0.62, 1.01],
          [0.21, -0.72, 1.6, -0.51, 0.98], [0.28, -0.71, 1.71, -0.65, 1.12]],
}
PAGE_X = [[0.57, 0.43, 0.09], [0.35, 0.62, 0.02], [0.87, 0.85, 0.04], [0.8, 0.18, 0.7]]
PAGE_WQ = [[-1.38, 0.77, 1.83, 1.94, 0.65], [-1.35, -0.42, -0.89, 1.82, -0.8], [0.24, -0.37, -1.45, -0.46, 1.08]]


def part10_problem():
    """The page's problem, drawn as the page draws it (also used by tests/test_notebook.py)."""
    rng = np.random.default_rng(16)
    N, D1, D2 = 4, 3, 5
    X = rng.uniform(0, 1, size=(N, D1))
    W_Q = rng.uniform(-2, 2, size=(D1, D2))
    W_K = rng.uniform(-2, 2, size=(D1, D2))
    W_V = rng.uniform(-2, 2, size=(D1, D2))
    assert np.allclose(np.round(X, 2), PAGE_X) and np.allclose(np.round(W_Q, 2), PAGE_WQ)
    return worked.Problem(X, W_Q, W_K, W_V, tokens=["I", "drink", "hot", "coffee"], title="I drink hot coffee")


@pytest.fixture(scope="module")
def solution():
    return worked.solve(part10_problem())


@pytest.mark.parametrize("name", list(PAGE))
def test_part10_tables(solution, name):
    """Each printed table matches to 2 decimals (as NumPy prints them)."""
    m = solution.matrices()[name]
    got = np.round(np.array([[m.value(i, j) for j in range(m.shape[1])] for i in range(m.shape[0])]), 2)
    assert np.allclose(got, np.array(PAGE[name]), atol=1e-9), (name, got)


def test_part10_rows_sum_to_one(solution):
    """The weights' row sums are 1 (the page prints [1. 1. 1. 1.])."""
    w = solution.matrices()["weights"]
    for i in range(4):
        assert abs(sum(w.value(i, j) for j in range(4)) - 1) < 1e-12


def test_numpy_floats_become_their_shortest_decimal():
    """A NumPy float entry is read through repr(): 0.1 is exactly 1/10, not the binary float."""
    from fractions import Fraction

    p = worked.Problem(np.array([[0.1, 0.2]]), np.array([[1.0], [1.0]]), np.array([[1.0], [1.0]]), np.array([[1.0], [1.0]]))
    assert p.X[0] == (Fraction(1, 10), Fraction(1, 5))
