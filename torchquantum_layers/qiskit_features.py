"""Derived feature columns for Qiskit angles that are non-affine in the inputs (ZZFeatureMap's
``2(π − x_i)(π − x_j)``, a data map with ``sin``/``exp``, ``x²`` ...).

A :class:`~torchquantum_layers.Circuit` angle is affine in its parameters, so
:func:`~torchquantum_layers.qiskit_interop.from_qiskit` turns each distinct non-affine function of the
inputs into one extra input column, computed from the features by :class:`DerivedFeatures`: a small
``nn.Module`` that evaluates the expressions with torch operations (batched, differentiable in x, on
x's device and dtype). The expressions are read through ``ParameterExpression.sympify()`` (sympy, a
dependency of the ``qiskit`` extra) and compiled once into a plain tree of tuples each, then all
together into one program of plain tuples (shared subexpressions once, each depth's nodes of one
kind as one torch op), so the module needs neither sympy nor Qiskit to run, pickles, and has no
state_dict entries.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from .caching import building_cache
from .circuit import Input, Param
from .qasm3_angles import _make

__all__ = ["DerivedFeatures"]

# sympy function name -> torch function; conjugate is the identity because features are real
_FUNCTIONS = {
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin, "acos": torch.acos,
    "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "exp": torch.exp,
    "log": torch.log, "Abs": torch.abs, "sign": torch.sign, "sqrt": torch.sqrt, "conjugate": lambda t: t,
}


def _sympy():
    try:
        import sympy
    except ImportError as exc:
        raise ModuleNotFoundError("from_qiskit: angles that are non-affine in the inputs are read with sympy: pip "
                                  "install 'torchquantum-layers[qiskit]' (the qiskit extra)", name="sympy") from exc
    return sympy


def _as_sympy(expression, sympy):
    """A sympy expression from a Qiskit ParameterExpression (Qiskit 1.x may hand back symengine)."""
    if isinstance(expression, sympy.Basic):
        return expression
    s = expression.sympify() if hasattr(expression, "sympify") else expression
    return s if isinstance(s, sympy.Basic) else sympy.sympify(s)


def _real_number(e, what: str) -> float:
    try:
        z = complex(e.evalf(30))
    except (TypeError, ValueError):     # zoo, nan, an unevaluated function of a number
        raise ValueError(f"{what}: `{e}` is not a finite number") from None
    if abs(z.imag) > 1e-12 * max(1.0, abs(z.real)):
        raise ValueError(f"{what}: the constant `{e}` is not real")
    if not math.isfinite(z.real):
        raise ValueError(f"{what}: the constant `{e}` is not finite")
    return z.real


# =============================================================================================
# sympy -> a tree of tuples: ("x", column) | ("c", number) | ("add"/"mul", children) |
# ("pow", base, exponent) | ("fn", name, argument); constant subtrees are folded to ("c", v)
def _compile(e, columns: dict, what: str, sympy):
    if e.is_number:
        return ("c", _real_number(e, what))
    if isinstance(e, sympy.Symbol):
        if e.name not in columns:
            raise ValueError(f"{what}: `{e.name}` is not an input parameter (inputs=)")
        return ("x", columns[e.name])
    if isinstance(e, (sympy.Add, sympy.Mul)):
        add = isinstance(e, sympy.Add)
        parts = [_compile(a, columns, what, sympy) for a in e.args]
        consts = [p[1] for p in parts if p[0] == "c"]
        rest = tuple(p for p in parts if p[0] != "c")
        c = math.fsum(consts) if add else math.prod(consts)
        if not add and c == 0.0:
            return ("c", 0.0)
        if c != (0.0 if add else 1.0):
            rest = (("c", c),) + rest
        return ("add" if add else "mul", rest) if len(rest) > 1 else rest[0]
    if isinstance(e, sympy.Pow):
        base = _compile(e.base, columns, what, sympy)
        exponent = _compile(e.exp, columns, what, sympy)
        if exponent[0] == "c":
            k = exponent[1]
            if k == 0.5:
                return ("fn", "sqrt", base)
            # an int exponent keeps negative bases real (torch.pow(-2., 1.5) is nan, as it should be)
            exponent = ("c", int(k)) if float(k).is_integer() else exponent
        return ("pow", base, exponent)
    name = getattr(e.func, "__name__", type(e).__name__)
    if isinstance(e, sympy.Function) and name in _FUNCTIONS and len(e.args) == 1:
        return ("fn", name, _compile(e.args[0], columns, what, sympy))
    raise ValueError(f"{what}: `{e}` uses {name}, which has no torch equivalent here (supported: + - * /, powers, "
                     f"{', '.join(sorted(n for n in _FUNCTIONS if n != 'Abs'))}, abs, numeric constants)")


# =============================================================================================
# the trees of all expressions -> one program, evaluated level by level
#
# A torch dispatch (and its autograd node) costs more than the arithmetic on a batch of a few
# hundred numbers, so the trees are merged into one DAG (a common subexpression is computed once)
# and the nodes of one kind and arity at one depth are evaluated together: one gather of their
# operand columns, then one elementwise op for all of them. The dispatches grow with the depth and
# the number of kinds, not with the number of expressions. Node keys, hashable and so also the
# CSE keys (leaves ("x", j) and ("c", v)):
#   ("lin", ((w, a), ...), b)   Σ w·a + b   an add; its terms' constant factors and constants
#                                           folded into weights and bias
#   ("mul", (a, b, ...), s)     s·a·b·…     its constant factor folded into s
#   ("fn", name, a)   ("powc", a, k) a**k with a number k   ("pow", a, b) a**b
# Constant factors and terms ride along as vectors, so the leaves are almost always x's columns
# alone and a level reads its operands from one block of columns with no concatenation.
def _dag(node, memo: dict) -> tuple:
    key = memo.get(node)
    if key is not None:
        return key
    tag = node[0]
    if tag == "x":
        key = node
    elif tag == "c":
        key = ("c", float(node[1]))
    elif tag == "fn":
        arg = _dag(node[2], memo)
        key = arg if node[1] == "conjugate" else ("fn", node[1], arg)
    elif tag == "pow":
        base = _dag(node[1], memo)
        key = ("powc", base, node[2][1]) if node[2][0] == "c" else ("pow", base, _dag(node[2], memo))
    elif tag == "mul":         # _compile leaves at most one constant, first
        parts = node[1]
        scale = float(parts[0][1]) if parts[0][0] == "c" else 1.0
        factors = tuple(_dag(p, memo) for p in parts if p[0] != "c")
        key = ("lin", ((scale, factors[0]),), 0.0) if len(factors) == 1 else ("mul", factors, scale)
    else:
        terms, bias = [], 0.0
        for p in node[1]:
            if p[0] == "c":
                bias = float(p[1])
                continue
            a = _dag(p, memo)
            if a[0] == "lin" and len(a[1]) == 1 and a[2] == 0.0:      # c·y: c becomes y's weight
                terms.append(a[1][0])
            else:
                terms.append((1.0, a))
        key = ("lin", tuple(terms), bias)
    memo[node] = key
    return key


def _operands(key) -> tuple:
    tag = key[0]
    if tag == "lin":
        return tuple(a for _, a in key[1])
    if tag == "mul":
        return key[1]
    if tag == "fn":
        return (key[2],)
    return (key[1],) if tag == "powc" else (key[1], key[2])


def _plan(in_features: int, passthrough: int, programs) -> tuple:
    """``(constants, levels, output)``, plain tuples. Columns live in blocks: x, the constants
    (if any expression reads one), then one block per step; a step is ``(kind, k, n, source,
    indices, a, b)``: ``n`` nodes of arity ``k`` whose operands, position-major, are ``indices``
    into block ``source`` (or, when they span blocks, ``-1``: into all earlier blocks
    concatenated). ``output`` is ``("cat", blocks)`` when the expressions are whole blocks in
    order (x's first ``passthrough`` columns, then those blocks), else ``("gather", columns)``."""
    memo = {}
    roots = [_dag(p, memo) for p in programs]
    level, order, consts = {}, [], {}

    def visit(key):             # post-order: a group's nodes come in the order the roots need them
        if key not in level:
            if key[0] in ("x", "c"):
                level[key] = 0
                if key[0] == "c":
                    consts.setdefault(key, len(consts))
            else:
                level[key] = 1 + max(visit(a) for a in _operands(key))
                order.append(key)
        return level[key]

    for r in roots:
        visit(r)
    groups = {}
    for key in order:
        tag = key[0]
        sub = key[1] if tag == "fn" else len(key[1]) if tag in ("lin", "mul") else None
        groups.setdefault((level[key], tag, sub), []).append(key)
    where = {("x", j): (0, j) for j in range(in_features)}       # column -> (block, offset)
    sizes = [in_features]
    if consts:
        where.update({c: (1, i) for c, i in consts.items()})
        sizes.append(len(consts))
    computed = len(sizes)

    def starts():
        s = [0]
        for size in sizes[:-1]:
            s.append(s[-1] + size)
        return s

    levels = []
    for depth in range(1, 1 + max(level.values(), default=0)):
        steps = []
        for (d, tag, _), nodes in groups.items():
            if d != depth:
                continue
            n, a, b = len(nodes), None, None
            if tag == "lin":
                k = len(nodes[0][1])
                operands = [node[1][p][1] for p in range(k) for node in nodes]
                w = tuple(node[1][p][0] for p in range(k) for node in nodes)
                a = None if all(v == 1.0 for v in w) else w
                b = None if all(node[2] == 0.0 for node in nodes) else tuple(node[2] for node in nodes)
            elif tag == "mul":
                k = len(nodes[0][1])
                operands = [node[1][p] for p in range(k) for node in nodes]
                a = None if all(node[2] == 1.0 for node in nodes) else tuple(node[2] for node in nodes)
            elif tag == "fn":
                k, operands, a = 1, [node[2] for node in nodes], nodes[0][1]
            elif tag == "powc":
                k, operands = 1, [node[1] for node in nodes]
                ks = [node[2] for node in nodes]
                # one shared exponent stays a Python number: torch.pow(t, 2) is t·t, as before
                a = ks[0] if all(type(e) is type(ks[0]) and e == ks[0] for e in ks) else tuple(map(float, ks))
            else:
                k, operands = 2, [node[p] for p in (1, 2) for node in nodes]
            blocks = {where[o][0] for o in operands}
            if len(blocks) == 1:
                source, idx = blocks.pop(), tuple(where[o][1] for o in operands)
                if idx == tuple(range(sizes[source])):       # a whole block in order: no gather
                    idx = None
            else:
                s = starts()
                source, idx = -1, tuple(s[where[o][0]] + where[o][1] for o in operands)
            steps.append((tag, k, n, source, idx, a, b))
            for i, node in enumerate(nodes):
                where[node] = (len(sizes), i)
            sizes.append(n)
        levels.append(tuple(steps))
    cols, segments = [where[r] for r in roots], []
    while segments is not None and sum(sizes[s] for s in segments) < len(cols):
        at = sum(sizes[s] for s in segments)
        block = cols[at][0]
        whole = [(block, j) for j in range(sizes[block])]
        segments = segments + [block] if cols[at:at + len(whole)] == whole else None
    # x or the constants alone would come back as themselves (an expanded view): copy them
    if segments and (passthrough or len(segments) > 1 or segments[0] >= computed):
        output = ("cat", tuple(segments))
    else:
        s = starts()
        output = ("gather", tuple(range(passthrough)) + tuple(s[b] + o for b, o in cols))
    return tuple(c[1] for c in consts), tuple(levels), output


def _materialise(plan, device, dtype) -> tuple:
    """The plan's numbers as tensors on ``device``: constants, weights and exponents in
    ``dtype``, indices as int64."""
    consts, levels, output = plan

    def real(values):
        # through float64, so that a float32 constant rounds once, as a Python float operand does
        return torch.tensor(values, dtype=torch.float64).to(device=device, dtype=dtype)

    def vector(values, k=1):
        if values is None or not isinstance(values, tuple):
            return values
        t = real(values)
        return t.view(k, -1) if k > 1 else t

    def index(values):
        return None if values is None else torch.tensor(values, dtype=torch.long, device=device)

    steps = tuple(tuple((kind, k, n, source, index(idx), a if kind == "fn" else vector(a, k if kind == "lin" else 1),
                         vector(b)) for kind, k, n, source, idx, a, b in level) for level in levels)
    if output[0] == "gather":
        output = ("gather", index(output[1]))
    return real(consts) if consts else None, steps, output


def _run(x: torch.Tensor, passthrough: int, tensors) -> torch.Tensor:
    consts, levels, output = tensors
    blocks = [x] if consts is None else [x, consts.expand(*x.shape[:-1], consts.shape[0])]
    for steps in levels:
        everything, new = None, []
        for kind, k, n, source, idx, a, b in steps:
            if source < 0:
                if everything is None:
                    everything = torch.cat(blocks, -1)
                g = everything.index_select(-1, idx)
            else:
                g = blocks[source] if idx is None else blocks[source].index_select(-1, idx)
            if k > 1:
                g = g.unflatten(-1, (k, n))
            if kind == "lin":
                if a is not None:
                    g = g * a
                y = g.sum(-2) if k > 1 else g
                if b is not None:
                    y = y + b
            elif kind == "mul":
                factors = g.unbind(-2)
                y = factors[0]
                for f in factors[1:]:
                    y = y * f
                if a is not None:
                    y = y * a
            elif kind == "fn":
                y = _FUNCTIONS[a](g)
            elif kind == "powc":
                y = torch.pow(g, a)
            else:
                y = torch.pow(*g.unbind(-2))
            new.append(y)
        blocks += new
    if output[0] == "gather":
        return torch.cat(blocks, -1).index_select(-1, output[1])
    parts = [blocks[s] for s in output[1]]
    if passthrough:
        parts.insert(0, x if passthrough == x.shape[-1] else x[..., :passthrough])
    return torch.cat(parts, -1) if len(parts) > 1 else parts[0]


class DerivedFeatures(nn.Module):
    """``(..., F)`` features → ``(..., P + m)``: the first ``P = passthrough`` columns of ``x``
    (default all ``F``), then one column per expression, evaluated with torch operations on
    ``x``'s device and dtype and differentiable in ``x``.

    ``inputs``: the ``F`` input Parameters (or their names) in column order; ``expressions``:
    Qiskit ParameterExpressions or sympy expressions in them (+ − × ÷, powers, sin, cos, tan,
    their inverses and hyperbolic forms, exp, log, sqrt, abs, sign, numeric constants such as π
    and E); anything else raises ValueError naming the expression. This is the ``feature_map`` of
    ``from_qiskit(..., return_feature_map=True)`` and the ``input_map`` of
    :func:`~torchquantum_layers.qiskit_interop.layer_from_qiskit`."""

    def __init__(self, inputs, expressions=(), passthrough: Optional[int] = None):
        super().__init__()
        names = [p if isinstance(p, str) else getattr(p, "name", None) for p in inputs]
        if any(not isinstance(n, str) for n in names):
            raise TypeError(f"DerivedFeatures: inputs must be Qiskit Parameters or names, got {list(inputs)!r}")
        self.in_features = len(names)
        if passthrough is None:
            passthrough = self.in_features
        if isinstance(passthrough, bool) or not isinstance(passthrough, int) or not 0 <= passthrough <= len(names):
            raise ValueError(f"DerivedFeatures: passthrough must be an int in [0, {len(names)}], got {passthrough!r}")
        self.passthrough = passthrough
        columns = {n: c for c, n in enumerate(names)}
        programs, texts = [], []
        if expressions:
            sympy = _sympy()
            for e in expressions:
                s = _as_sympy(e, sympy)
                programs.append(_compile(s, columns, f"DerivedFeatures: expression `{s}`", sympy))
                texts.append(str(s))
        self._set(programs, texts)

    def _set(self, programs, texts):
        self._programs, self.expressions = tuple(programs), tuple(texts)
        self._plan = _plan(self.in_features, self.passthrough, self._programs)
        # (device, dtype) -> the plan as tensors; rebuilt on demand, so never pickled or copied
        self._tensors = {}

    @classmethod
    def _compiled(cls, in_features: int, passthrough: int, programs, texts) -> "DerivedFeatures":
        m = cls([str(c) for c in range(in_features)], passthrough=passthrough)
        m._set(programs, texts)
        return m

    def __getstate__(self):
        state = super().__getstate__().copy()
        state["_tensors"] = {}
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "_plan" not in state:         # pickled before the plan existed
            self._set(self._programs, self.expressions)

    @property
    def out_features(self) -> int:
        return self.passthrough + len(self._programs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
            raise TypeError(f"DerivedFeatures: x must be a real floating tensor, got {got}")
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"DerivedFeatures: x must have {self.in_features} feature column(s) in its last "
                             f"dimension, got shape {tuple(x.shape)}")
        if not self._programs:
            return x if self.passthrough == self.in_features else x[..., :self.passthrough]
        key = (x.device, x.dtype)
        tensors = self._tensors.get(key)
        if tensors is None:
            with building_cache():
                tensors = self._tensors[key] = _materialise(self._plan, x.device, x.dtype)
        return _run(x, self.passthrough, tensors)

    def extra_repr(self) -> str:
        shown = ", ".join(f"[{self.passthrough + k}] {e}" for k, e in enumerate(self.expressions))
        return f"in_features={self.in_features}, passthrough={self.passthrough}, derived=({shown})"


# =============================================================================================
# from_qiskit's side: angles that Qiskit's own gradient did not find affine
class DerivedAngles:
    """Reads the angles :func:`~torchquantum_layers.qiskit_interop._angle` could not: an affine
    form in the trainable parameters plus (when ``allowed``) a ``("derived", g)`` term, ``g`` a
    sympy expression of the inputs. The emitter turns such a term into an input column through
    :meth:`input`, so columns are numbered in the order the circuit first reads them, one per
    distinct ``g``, and an expression nothing reads (a global phase dropped by
    ``global_phase=False``) gets none."""

    def __init__(self, binding: dict, n_features: int, allowed: bool):
        self.binding, self.n_features, self.allowed = binding, n_features, allowed
        self.compiled = {}                   # g -> (program, text)
        self.columns, self.programs, self.texts = {}, [], []
        self.input_columns = {n: b.column for n, b in binding.items() if isinstance(b, Input)}

    def _hint(self) -> str:
        return ("pass return_feature_map=True (from_qiskit then returns (circuit, feature_map), the map "
                "computing such angles as extra input columns) or use tql.qiskit_interop.layer_from_qiskit")

    def angle(self, value, what: str, name: str):
        try:
            sympy = _sympy()
        except ModuleNotFoundError:
            if not self.allowed:     # the refusal a circuit gave before derived columns existed
                raise ValueError(f"{what}: the angle `{value}` is not affine (a*θ + b) in the parameter '{name}'; "
                                 f"reading it as a derived input column needs sympy") from None
            raise
        s = _as_sympy(value, sympy)
        symbols = {sym.name: sym for sym in s.free_symbols}
        trainable = sorted(n for n in symbols if isinstance(self.binding.get(n), Param))
        terms = {}
        for n in trainable:
            d = sympy.diff(s, symbols[n])
            if d.free_symbols:
                factors = sorted(sym.name for sym in d.free_symbols)
                if all(f in self.input_columns for f in factors):
                    why = (f"the trainable parameter '{n}' is multiplied by a function of the input(s) "
                           f"{', '.join(map(repr, factors))} (its coefficient is `{d}`)")
                else:
                    why = f"it is not affine (a*θ + b) in the trainable parameter '{n}' (d/d{n} = `{d}`)"
                raise ValueError(f"{what}: the angle `{value}` cannot be read: {why}; trainable parameters must "
                                 f"enter angles as a*θ + b with numbers a, b (only inputs= parameters may enter "
                                 f"non-affinely, as derived feature columns)")
            terms[n] = _real_number(d, f"{what}: the coefficient of '{n}' in `{value}`")
        rest = s.subs({symbols[n]: 0 for n in trainable}) if trainable else s
        names = sorted(sym.name for sym in rest.free_symbols)
        unknown = [n for n in names if n not in self.input_columns]
        if unknown:     # pragma: no cover - from_qiskit checks every parameter is bound first
            raise ValueError(f"{what}: the parameter '{unknown[0]}' in `{value}` is in neither inputs= nor trainable=")
        nonaffine = [n for n in names if sympy.diff(rest, symbols[n]).free_symbols]
        if not nonaffine:            # Qiskit's gradient gave up (abs, sign ...) where sympy's did not
            for n in names:
                terms[n] = _real_number(sympy.diff(rest, symbols[n]), f"{what}: the coefficient of '{n}' in "
                                                                      f"`{value}`")
            const = _real_number(rest.subs({symbols[n]: 0 for n in names}), f"{what}: the constant of `{value}`")
            return _make(const, terms)
        if not self.allowed:
            raise ValueError(f"{what}: the angle `{value}` is not affine (a*θ + b) in the input parameter "
                             f"'{nonaffine[0]}': a non-affine function of inputs is a derived feature column; "
                             f"{self._hint()}")
        coefficient, core = rest.as_coeff_Mul()      # ±g(x) and 2·g(x) share g's column
        if core not in self.compiled:        # compiled here, so an unsupported function fails on its gate
            self.compiled[core] = (_compile(core, self.input_columns, f"{what}: the angle `{value}`", sympy),
                                   str(core))
        terms[("derived", core)] = _real_number(coefficient, f"{what}: the coefficient of `{core}` in `{value}`")
        return _make(0.0, terms)

    def input(self, key) -> Input:
        """The input column of a ``("derived", g)`` term, allocated on first use."""
        core = key[1]
        if core not in self.columns:
            self.columns[core] = Input(self.n_features + len(self.programs))
            program, text = self.compiled[core]
            self.programs.append(program)
            self.texts.append(text)
        return self.columns[core]

    def module(self, circuit_inputs: int) -> DerivedFeatures:
        # the map hands the circuit exactly the columns it reads (a QuantumLayer checks that
        # width), though the last inputs= parameters may go unused
        passthrough = self.n_features if self.programs else min(circuit_inputs, self.n_features)
        return DerivedFeatures._compiled(self.n_features, passthrough, self.programs, self.texts)
