"""The problems ``QAOATask`` builds from plain arguments: names, aliases, named graphs, and the
conversion of tensors / arrays / networkx graphs to plain data (checkpoints load with
``weights_only=True``; LightningCLI configs stay YAML)."""
from __future__ import annotations

import re
from numbers import Integral, Real

import torch

from torchquantum_layers import optimization as opt

__all__ = ["PROBLEMS", "PADDLE_GRAPH", "named_graph", "build_problem"]

PADDLE_GRAPH = [[0, 1], [1, 2], [2, 3], [3, 0], [1, 3]]
_GRAPH_ARGS = ("graph", "n_nodes")
# problem name -> (builder, the optional arguments it reads)
PROBLEMS = {
    "maxcut": (opt.maxcut, _GRAPH_ARGS),
    "max_independent_set": (opt.max_independent_set, _GRAPH_ARGS + ("node_weights", "penalty")),
    "min_vertex_cover": (opt.min_vertex_cover, _GRAPH_ARGS + ("node_weights", "penalty")),
    "max_clique": (opt.max_clique, _GRAPH_ARGS + ("node_weights", "penalty")),
    "graph_colouring": (opt.graph_colouring, _GRAPH_ARGS + ("n_colours", "penalty")),
    "number_partitioning": (opt.number_partitioning, ("numbers",)),
    "tsp": (opt.tsp, ("distances", "penalty", "fix_start")),
    "portfolio": (opt.portfolio, ("expected_returns", "covariance", "budget", "risk_factor", "penalty")),
    "qubo": (opt.from_qubo, ("Q", "offset")),
    "ising": (opt.from_ising, ("h", "J", "offset")),
}
_ALIASES = {"mis": "max_independent_set", "independent_set": "max_independent_set",
            "vertex_cover": "min_vertex_cover", "mvc": "min_vertex_cover", "clique": "max_clique",
            "graph_coloring": "graph_colouring", "colouring": "graph_colouring", "coloring": "graph_colouring",
            "partition": "number_partitioning", "number_partition": "number_partitioning",
            "travelling_salesperson": "tsp", "from_qubo": "qubo", "from_ising": "ising"}
# every problem-description argument of QAOATask, for the "not used by this problem" check
_PROBLEM_ARGS = ("graph", "n_nodes", "node_weights", "penalty", "n_colours", "numbers", "distances", "fix_start",
                 "expected_returns", "covariance", "budget", "risk_factor", "Q", "h", "J", "offset")
_GRAPH_SPECS = "'paddle', 'cycle:N', 'complete:N', 'Dregular:N[:seed=S]' (e.g. '3regular:16:seed=1')"


def named_graph(spec: str) -> list:
    """The edge list ``[[u, v], ...]`` of a named graph (see the module docstring for the names)."""
    what = "QAOATask"
    if not isinstance(spec, str):
        raise TypeError(f"{what}: a named graph is a string ({_GRAPH_SPECS}), got {type(spec).__name__}")
    s = spec.strip().lower().replace(" ", "")
    if s == "paddle":
        return [list(e) for e in PADDLE_GRAPH]
    m = re.fullmatch(r"(cycle|complete|(\d+)-?regular):(\d+)(?::seed=(-?\d+))?", s)
    if m is None:
        raise ValueError(f"{what}: unknown graph spec {spec!r}; use {_GRAPH_SPECS} or an edge list "
                         f"[[u, v] or [u, v, w], ...]")
    kind, degree, n, seed = m.group(1), m.group(2), int(m.group(3)), m.group(4)
    if seed is not None and degree is None:
        raise ValueError(f"{what}: graph spec {spec!r}: only random regular graphs take a seed")
    try:
        if kind == "cycle":
            edges = opt.cycle_graph(n)
        elif kind == "complete":
            if n < 2:
                raise ValueError(f"the complete graph needs at least 2 nodes, got {n}")
            edges = opt.complete_graph(n)
        else:
            edges = opt.random_regular_graph(int(degree), n, seed=0 if seed is None else int(seed))
    except ValueError as err:
        raise ValueError(f"{what}: graph spec {spec!r}: {err}") from None
    return [[int(u), int(v)] for u, v in edges]


def _plain(value):
    """Tensors, arrays and tuples as nested lists of Python numbers (checkpoints load with
    ``weights_only=True`` and LightningCLI configs stay YAML)."""
    if isinstance(value, torch.Tensor) or type(value).__module__ == "numpy":
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        return float(value)
    return value


def _plain_graph(graph, n_nodes):
    """``(graph, n_nodes)``: a graph argument as a name or an edge list of plain numbers, and the
    node count (that of a networkx graph or :class:`~torchquantum_layers.optimization.Graph`, whose
    isolated nodes an edge list alone would lose)."""
    if graph is None or isinstance(graph, str):
        return graph, n_nodes
    if isinstance(graph, (list, tuple)):
        return _plain(graph), _plain(n_nodes)
    # networkx graphs, dicts, tensors and arrays: read (and check the labels of) the edges once here;
    # the problem builder checks the weights with its own rules
    g = opt.as_graph(graph, n_nodes, what="QAOATask: graph", allow_negative=True)
    return [[u, v, w] for u, v, w in g.edge_list()], int(g.n_nodes)


def build_problem(name: str, args: dict):
    """The :class:`~torchquantum_layers.optimization.Problem` ``name`` (a key of :data:`PROBLEMS`) from
    QAOATask's problem arguments ``args`` (every name of :data:`_PROBLEM_ARGS`, None when not given)."""
    builder, reads = PROBLEMS[name]
    unused = [k for k in _PROBLEM_ARGS if args[k] is not None and k not in reads]
    if unused:
        raise ValueError(f"QAOATask: {', '.join(unused)} {'is' if len(unused) == 1 else 'are'} not used by "
                         f"problem {name!r} (it reads {', '.join(reads)})")
    kw = {k: args[k] for k in reads if args[k] is not None}
    if "graph" in reads:
        graph = kw.pop("graph", "paddle")
        if isinstance(graph, str):
            graph = named_graph(graph)
        kw["graph"] = graph
    if name == "number_partitioning":
        if "numbers" not in kw:
            raise ValueError("QAOATask: problem 'number_partitioning' needs numbers=[...]")
        kw["numbers_"] = kw.pop("numbers")
    required = {"graph_colouring": ("n_colours",), "tsp": ("distances",),
                "portfolio": ("expected_returns", "covariance", "budget"), "qubo": ("Q",), "ising": ("h", "J")}
    missing = [k for k in required.get(name, ()) if k not in kw]
    if missing:
        raise ValueError(f"QAOATask: problem {name!r} needs {', '.join(missing)}")
    try:
        return builder(**kw)
    except (ValueError, TypeError) as err:
        raise type(err)(f"QAOATask(problem={name!r}): {err}") from None
