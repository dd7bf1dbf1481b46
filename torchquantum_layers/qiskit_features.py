"""Derived feature columns for Qiskit angles that are non-affine in the inputs (ZZFeatureMap's
``2(π − x_i)(π − x_j)``, a data map with ``sin``/``exp``, ``x²`` ...).

A :class:`~torchquantum_layers.Circuit` angle is affine in its parameters, so
:func:`~torchquantum_layers.qiskit_interop.from_qiskit` turns each distinct non-affine function of the
inputs into one extra input column, computed from the features by :class:`DerivedFeatures`: a small
``nn.Module`` that evaluates the expressions with torch operations (batched, differentiable in x, on
x's device and dtype). The expressions are read through ``ParameterExpression.sympify()`` (sympy, a
dependency of the ``qiskit`` extra) and compiled once into a plain tree of tuples, so the module
needs neither sympy nor Qiskit to run, pickles, and has no state_dict entries.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

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


def _evaluate(node, x: torch.Tensor):
    tag = node[0]
    if tag == "x":
        return x[..., node[1]]
    if tag == "c":
        return node[1]
    if tag == "fn":
        return _FUNCTIONS[node[1]](_evaluate(node[2], x))
    if tag == "pow":
        return torch.pow(_evaluate(node[1], x), _evaluate(node[2], x))
    values = [_evaluate(n, x) for n in node[1]]
    out = values[0]
    for v in values[1:]:
        out = out + v if tag == "add" else out * v
    return out


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
        self._programs, self.expressions = tuple(programs), tuple(texts)

    @classmethod
    def _compiled(cls, in_features: int, passthrough: int, programs, texts) -> "DerivedFeatures":
        m = cls([str(c) for c in range(in_features)], passthrough=passthrough)
        m._programs, m.expressions = tuple(programs), tuple(texts)
        return m

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
        cols = []
        for p in self._programs:
            v = _evaluate(p, x)
            cols.append(v if isinstance(v, torch.Tensor) else x.new_full(x.shape[:-1], v))
        return torch.cat([x[..., :self.passthrough], torch.stack(cols, -1)], -1)

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
