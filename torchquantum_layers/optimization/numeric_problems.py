"""Number partitioning, the travelling salesman (one-hot position registers), budgeted portfolio
optimisation, and problems given directly as a QUBO matrix or Ising fields and couplings."""
from __future__ import annotations

import numbers
from typing import Optional

import torch

from .arguments import (_bipartition_codec, _bits_from_nodes, _matrix, _number, _penalty, _real_tensor, _sorted_nodes,
                        _vector)
from .problems import Problem, _QuboBuilder

__all__ = ["number_partitioning", "tsp", "portfolio", "from_qubo", "from_ising"]


def number_partitioning(numbers_) -> Problem:
    """Split numbers ``a_i`` into two sets with sums as equal as possible.

    Cost ``C(x) = (Σ_i a_i z_i)^2`` with spins ``z_i = 1 - 2 x_i`` (the squared difference of the two
    sums); ``objective`` is the absolute difference ``|Σ a_i z_i|`` (``"min"``). Numbers must be
    finite (negative values are allowed). ``decode`` returns the two index lists ``(set0, set1)``.
    """
    what = "number_partitioning"
    a = _vector(numbers_, None, "numbers", what)
    n = a.shape[0]
    if n < 2:
        raise ValueError(f"{what}: need at least 2 numbers, got {n}")
    qb = _QuboBuilder(n)
    # (Σ a_i (1 - 2 x_i))^2 = (S - 2 Σ a_i x_i)^2
    qb.square([(i, -2 * float(a[i])) for i in range(n)], float(a.sum()))
    S = float(a.sum())

    def objective(bits):
        return (S - 2 * (bits.to(torch.float64) @ a)).abs()
    decode, encode = _bipartition_codec(n, what)
    return Problem(what, n, qb.U, qb.const, "sum difference", "min", objective, None, decode, encode,
                   data={"numbers": a})


def _nearest_neighbour_length(D: torch.Tensor) -> float:
    n = D.shape[0]
    tour, left = [0], set(range(1, n))
    while left:
        here = tour[-1]
        nxt = min(left, key=lambda c: (float(D[here, c]), c))
        tour.append(nxt)
        left.discard(nxt)
    return sum(float(D[tour[i], tour[(i + 1) % n]]) for i in range(n))


def tsp(distances, penalty: Optional[float] = None, fix_start: bool = True) -> Problem:
    """Travelling salesperson on a (not necessarily symmetric) distance matrix, one-hot encoded.

    Wire ``q(c, t)`` is 1 when city c is visited at position t of the closed tour. With
    ``fix_start=True`` (default, as Paddle Quantum) city 0 is pinned at position 0 and only cities
    1 … n-1 at positions 1 … n-1 are encoded: ``(n-1)^2`` qubits, ``q(c, t) = (c-1)(n-1) + (t-1)``;
    otherwise ``n^2`` qubits, ``q(c, t) = c n + t``. Cost = tour length
    ``Σ_t Σ_{u,v} D[u, v] x_{u,t} x_{v,t+1}`` + ``P [Σ_c (1 - Σ_t x_ct)^2 + Σ_t (1 - Σ_c x_ct)^2]``;
    the default ``P`` is 1.5 × the nearest-neighbour tour length (> the optimal length, so the
    minimum is a valid tour). Distances must be finite and non-negative (the diagonal is ignored).
    Feasible = a permutation matrix; ``objective`` = tour length (``"min"``). ``decode`` returns the
    tour as a list of cities starting with city 0 (infeasible bitstrings: cities ordered by the
    first position where their bit is set, unplaced cities last). ``mixer_groups`` are the cities'
    one-hot rows (XY mixer); ``mixer="swap"`` in :func:`~torchquantum_layers.optimization.qaoa`
    keeps the whole permutation subspace.
    """
    what = "tsp"
    D = _real_tensor(distances, "distances", what, "a square matrix")
    if D.dim() == 2 and D.shape[0] == D.shape[1]:
        # the diagonal is ignored (a city's distance to itself), whatever it holds: inf or NaN too
        D = D.clone()
        D.fill_diagonal_(0.0)
    D = _matrix(D, None, "distances", what)
    n = D.shape[0]
    if n < 3:
        raise ValueError(f"{what}: need at least 3 cities, got {n}")
    off = ~torch.eye(n, dtype=torch.bool)
    if bool((D[off] < 0).any()):
        i, j = ((D < 0) & off).nonzero()[0].tolist()
        raise ValueError(f"{what}: distance D[{i}, {j}] is negative ({float(D[i, j])}); distances must be >= 0")
    D = D.clone()
    D.fill_diagonal_(0.0)
    nn_len = _nearest_neighbour_length(D)
    P = _penalty(penalty, 1.5 * nn_len if nn_len > 0 else 1.0, what)
    if not isinstance(fix_start, bool):
        raise TypeError(f"{what}: fix_start must be a bool, got {fix_start!r}")
    first = 1 if fix_start else 0
    m = n - first                      # encoded cities and positions
    nq = m * m

    def q(c, t):
        return (c - first) * m + (t - first)
    qb = _QuboBuilder(nq)
    for t in range(n):
        t2 = (t + 1) % n
        for u in range(n):
            for v in range(n):
                if u == v or D[u, v] == 0:
                    continue
                d = float(D[u, v])
                fixed_u = fix_start and (u == 0 or t == 0)
                fixed_v = fix_start and (v == 0 or t2 == 0)
                if fix_start and ((u == 0) != (t == 0) or (v == 0) != (t2 == 0)):
                    continue                      # city 0 only at position 0
                if fixed_u and fixed_v:
                    qb.const += d
                elif fixed_u:
                    qb.linear(q(v, t2), d)
                elif fixed_v:
                    qb.linear(q(u, t), d)
                else:
                    qb.quadratic(q(u, t), q(v, t2), d)
    for c in range(first, n):
        qb.square([(q(c, t), -1.0) for t in range(first, n)], 1.0, P)
    for t in range(first, n):
        qb.square([(q(c, t), -1.0) for c in range(first, n)], 1.0, P)

    def full(bits):
        X = bits.view(-1, m, m).to(torch.float64)
        if not fix_start:
            return X
        F = torch.zeros(X.shape[0], n, n, dtype=torch.float64)
        F[:, 0, 0] = 1
        F[:, 1:, 1:] = X
        return F

    def objective(bits):
        F = full(bits)                       # (K, city, position)
        nxt = torch.roll(F, -1, dims=2)
        # Σ_t Σ_uv F[u,t] D[u,v] F[v,t+1]
        return torch.einsum("kut,uv,kvt->k", F, D, nxt)

    def feasible(bits):
        X = bits.view(-1, m, m)
        return (X.sum(2) == 1).all(1) & (X.sum(1) == 1).all(1)

    def decode(bits, repair):
        pos = {}
        for c in range(first, n):
            ts = [t for t in range(first, n) if bits[q(c, t)]]
            pos[c] = ts
        ok = all(len(v) == 1 for v in pos.values()) and len({v[0] for v in pos.values()}) == m
        if not ok and not repair:
            return None
        order = sorted(range(first, n), key=lambda c: (pos[c][0] if pos[c] else n, c))
        tour = ([0] if fix_start else []) + order
        if not fix_start:
            k0 = tour.index(0)
            tour = tour[k0:] + tour[:k0]
        return tour

    def encode(tour):
        tour = [int(c) for c in tour]
        if sorted(tour) != list(range(n)):
            raise ValueError(f"{what}.encode: {tour!r} is not a tour of the {n} cities")
        if fix_start:
            k0 = tour.index(0)
            tour = tour[k0:] + tour[:k0]
        bits = [0] * nq
        for t, c in enumerate(tour):
            if t >= first:
                bits[q(c, t)] = 1
        return bits

    def tour_length(tour):
        return sum(float(D[tour[i], tour[(i + 1) % n]]) for i in range(n))
    groups = tuple(tuple(q(c, t) for t in range(first, n)) for c in range(first, n))
    return Problem(what, nq, qb.U, qb.const, "tour length", "min", objective, feasible, decode, encode,
                   mixer_groups=groups,
                   data={"distances": D, "penalty": P, "fix_start": fix_start, "n_cities": n,
                         "layout": (first, m), "tour_length": tour_length})


def portfolio(expected_returns, covariance, budget: int, risk_factor: float = 0.5,
              penalty: Optional[float] = None) -> Problem:
    """Mean–variance portfolio selection with a budget: choose exactly ``budget`` of n assets.

    Cost ``C(x) = q xᵀ Σ x - μᵀ x + P (Σ_i x_i - B)^2`` (q = ``risk_factor``, as Qiskit Finance's
    PortfolioOptimization); the default ``P`` is 1.1 × (Σ|μ_i| + q Σ|Σ_ij|), larger than the spread of
    the unpenalised objective, so the minimum meets the budget. ``covariance`` must be symmetric
    positive semi-definite, ``0 <= budget <= n``. Feasible = exactly ``budget`` assets; ``objective``
    = ``q xᵀΣx - μᵀx`` (``"min"``). ``decode`` returns the chosen asset indices (repair: greedily
    drop or add the asset that lowers the objective most). ``mixer_groups`` is all the wires: the
    XY mixer keeps the number of chosen assets.
    """
    what = "portfolio"
    mu = _vector(expected_returns, None, "expected_returns", what)
    n = mu.shape[0]
    if n < 1:
        raise ValueError(f"{what}: need at least one asset")
    S = _matrix(covariance, n, "covariance", what)
    if not torch.allclose(S, S.T, atol=1e-10 * max(1.0, float(S.abs().max()))):
        raise ValueError(f"{what}: covariance must be symmetric")
    eig = torch.linalg.eigvalsh(S)
    if float(eig.min()) < -1e-9 * max(1.0, float(eig.abs().max())):
        raise ValueError(f"{what}: covariance is not positive semi-definite (smallest eigenvalue "
                         f"{float(eig.min()):.3g})")
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
        raise TypeError(f"{what}: budget must be an int, got {budget!r}")
    if not 0 <= budget <= n:
        raise ValueError(f"{what}: budget must be between 0 and the number of assets {n}, got {budget}")
    B = int(budget)
    q = _number(risk_factor, "risk_factor", what, nonneg=True)
    spread = float(mu.abs().sum()) + q * float(S.abs().sum())
    P = _penalty(penalty, 1.1 * spread if spread > 0 else 1.0, what)
    qb = _QuboBuilder(n)
    for i in range(n):
        qb.linear(i, q * float(S[i, i]) - float(mu[i]))
        for j in range(i + 1, n):
            qb.quadratic(i, j, 2 * q * float(S[i, j]))
    qb.square([(i, 1.0) for i in range(n)], -float(B), P)

    def objective(bits):
        X = bits.to(torch.float64)
        return q * ((X @ S) * X).sum(1) - X @ mu

    def feasible(bits):
        return bits.sum(1) == B

    def value(chosen):
        x = torch.zeros(n, dtype=torch.float64)
        x[list(chosen)] = 1
        return float(q * x @ S @ x - mu @ x)

    def decode(bits, repair):
        chosen = set(_sorted_nodes(bits))
        if repair:
            while len(chosen) > B:
                chosen.discard(min(chosen, key=lambda i: (value(chosen - {i}), i)))
            while len(chosen) < B:
                chosen.add(min(set(range(n)) - chosen, key=lambda i: (value(chosen | {i}), i)))
        return sorted(chosen)

    def encode(sol):
        return _bits_from_nodes(sol, n, what)
    return Problem(what, n, qb.U, qb.const, "risk-adjusted cost", "min", objective, feasible, decode, encode,
                   mixer_groups=(tuple(range(n)),),
                   data={"expected_returns": mu, "covariance": S, "budget": B, "risk_factor": q, "penalty": P})


def _upper_from_quadratic_form(M: torch.Tensor) -> torch.Tensor:
    """xᵀ M x (x binary) as an upper-triangular QUBO: U_ii = M_ii, U_ij = M_ij + M_ji (i < j)."""
    return torch.triu(M + M.T, 1) + torch.diag(torch.diagonal(M))


def from_qubo(Q, offset: float = 0.0) -> Problem:
    """A problem from a QUBO matrix: ``C(x) = xᵀ Q x + offset`` over binary x (minimised).

    ``Q`` is any real n × n matrix (only ``Q + Qᵀ`` off the diagonal matters; ``Q_ii`` is the linear
    term since ``x_i^2 = x_i``). ``objective`` is the cost itself; ``decode`` returns the bits.
    """
    what = "from_qubo"
    M = _matrix(Q, None, "Q", what)
    n = M.shape[0]
    if n < 1:
        raise ValueError(f"{what}: Q must be at least 1 × 1")
    off = _number(offset, "offset", what)
    U = _upper_from_quadratic_form(M)

    def objective(bits):
        X = bits.to(torch.float64)
        return off + ((X @ U) * X).sum(1)

    def decode(bits, repair):
        return list(bits)

    def encode(sol):
        return [int(b) for b in sol]
    return Problem("qubo", n, U, off, "cost", "min", objective, None, decode, encode, data={"Q": M})


def from_ising(h, J, offset: float = 0.0) -> Problem:
    """A problem from an Ising model: ``E(z) = offset + Σ_i h_i z_i + zᵀ J z`` (minimised).

    Spins ``z_i = +1`` for bit 0 and ``-1`` for bit 1 (the eigenvalues of ``Z_i``). ``J`` is an
    n × n matrix (each entry ``J_ij``, i ≠ j, contributes ``J_ij z_i z_j``, so a symmetric J counts a
    pair twice; a diagonal entry adds the constant ``J_ii``) or a dict ``{(i, j): J_ij}`` (one term
    per key, as dimod). ``decode`` returns the spins.
    """
    what = "from_ising"
    hv = _vector(h, None, "h", what)
    n = hv.shape[0]
    if n < 1:
        raise ValueError(f"{what}: h must have at least one entry (one per spin)")
    if isinstance(J, dict):
        Jm = torch.zeros(n, n, dtype=torch.float64)
        for key, v in J.items():
            if not isinstance(key, tuple) or len(key) != 2:
                raise TypeError(f"{what}: J keys must be (i, j) pairs, got {key!r}")
            i, j = key
            for x in (i, j):
                if isinstance(x, bool) or not isinstance(x, numbers.Integral) or not 0 <= x < n:
                    raise ValueError(f"{what}: J key {key!r}: spin {x!r} is not in 0 … {n - 1}")
            Jm[int(i), int(j)] += _number(v, f"J[{key}]", what)
    else:
        Jm = _matrix(J, n, "J", what)
    off = _number(offset, "offset", what)
    # z = 1 - 2x:  h z = h - 2h x;  J_ij z_i z_j = J_ij (1 - 2x_i - 2x_j + 4 x_i x_j)
    const = off + float(hv.sum()) + float(torch.diagonal(Jm).sum())
    Joff = Jm - torch.diag(torch.diagonal(Jm))
    Jsym = Joff + Joff.T                          # pair (i<j) coefficient
    const += float(torch.triu(Jsym, 1).sum())
    U = 4 * torch.triu(Jsym, 1)
    lin = -2 * hv - 2 * (torch.triu(Jsym, 1).sum(1) + torch.triu(Jsym, 1).sum(0))
    U = U + torch.diag(lin)

    def objective(bits):
        z = 1 - 2 * bits.to(torch.float64)
        return off + z @ hv + ((z @ Jm) * z).sum(1)

    def decode(bits, repair):
        return [1 - 2 * b for b in bits]

    def encode(spins):
        out = []
        for s in spins:
            if s not in (1, -1):
                raise ValueError(f"{what}.encode: spins must be +1 or -1, got {s!r}")
            out.append(0 if s == 1 else 1)
        return out
    return Problem("ising", n, U, const, "energy", "min", objective, None, decode, encode,
                   data={"h": hv, "J": Jm})
