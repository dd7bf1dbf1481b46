"""Angles non-affine in the inputs, read as derived feature columns
(torchquantum_layers/qiskit_features.py, ``from_qiskit(..., return_feature_map=True)`` and
``qiskit_interop.layer_from_qiskit``).

The oracle is Qiskit itself: ``Statevector(qc.assign_parameters(...))`` row by row (global phase
included), in tql's wire order through ``tql.from_qiskit_order``, and central finite differences of
``Statevector.expectation_value(SparsePauliOp)`` for the gradients.
"""
import copy
import pickle
import sys
import warnings

import numpy as np
import pytest
import torch
from torch import nn

qiskit = pytest.importorskip("qiskit", reason="the qiskit extra (in .[test])")
sympy = pytest.importorskip("sympy", reason="the qiskit extra (in .[test])")

from qiskit import QuantumCircuit  # noqa: E402
from qiskit.circuit import Parameter, ParameterVector  # noqa: E402
from qiskit.circuit import library as lib  # noqa: E402
from qiskit.quantum_info import SparsePauliOp, Statevector  # noqa: E402

import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import qiskit_interop  # noqa: E402
from torchquantum_layers.qiskit_features import DerivedFeatures  # noqa: E402

from .conftest import DTYPES, REAL  # noqa: E402

# amplitudes after ~30 gates; complex64 also rounds the derived angles (up to ~35 rad) in float32
TOL = {torch.complex64: 2e-5, torch.complex128: 1e-12}


def _library(function: str, blueprint: str, *args, **kwargs):
    """Qiskit 1.3+'s circuit-building function, else the older BlueprintCircuit class."""
    make = getattr(lib, function, None) or getattr(lib, blueprint)
    return make(*args, **kwargs)


def _zz_class():
    with warnings.catch_warnings():          # deprecated since Qiskit 2.1, still what migrating code has
        warnings.simplefilter("ignore", DeprecationWarning)
        return lib.ZZFeatureMap(3, reps=2)


def _custom_data_map(v):
    if len(v) == 1:
        return v[0].sin() + 0.5 * v[0].exp()
    return (v[0] - v[1]).cos() * (0.3 * v[0]).exp() - v[1].tan()


def _hand_made():
    """x0², x0·x1, sqrt(|x0|) + 1, under inverse / control / U, a non-affine global phase, and an
    angle g(x) + 2θ mixing a derived column with a trainable weight."""
    x = ParameterVector("x", 3)
    qc = QuantumCircuit(3, global_phase=x[0] * x[1])
    qc.h([0, 1, 2])
    qc.rx(x[0] ** 2, 0)
    qc.rzz(x[0] * x[1], 0, 1)
    qc.ry((x[0].abs()) ** 0.5 + 1, 2)
    qc.append(lib.RYGate(x[0] ** 2).inverse(), [1])          # −x0²: the same column, scale −1
    qc.crx(x[1] * x[2] - 0.4, 2, 0)
    qc.u(x[0] * x[1], x[2].sin(), x[2] ** 3 / 4, 1)           # U as P·RY·P, each a derived column
    qc.rz(x[2] ** 2 + 2 * Parameter("θ"), 2)
    qc.p(x[1] - 0.5 * x[2], 0)                                # affine: a plain input column
    return qc


FEATURE_MAPS = {
    "zz_default": lambda: _library("zz_feature_map", "ZZFeatureMap", 3, reps=2),
    "zz_class": _zz_class,
    "pauli_zzz": lambda: _library("pauli_feature_map", "PauliFeatureMap", 3, reps=1, paulis=["Z", "ZZ", "ZZZ"]),
    "custom_sin_cos_exp": lambda: _library("zz_feature_map", "ZZFeatureMap", 3, reps=1,
                                           data_map_func=_custom_data_map),
    "hand_made": _hand_made,
}


def _model(name):
    """(circuit, its input parameters, its trainable parameters): the feature map + real_amplitudes."""
    fmap = FEATURE_MAPS[name]()
    inputs = list(fmap.parameters)
    extra = [p for p in inputs if p.name == "θ"]             # the hand-made circuit's own weight
    inputs = [p for p in inputs if p not in extra]
    ansatz = _library("real_amplitudes", "RealAmplitudes", 3, reps=1)
    return fmap.compose(ansatz), inputs, extra + list(ansatz.parameters)


def _state(qc, values: dict) -> torch.Tensor:
    v = torch.as_tensor(Statevector(qc.assign_parameters(values)).data).reshape(1, -1)
    return tql.from_qiskit_order(v)[0]


def _weights(n, seed):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, n)


# =============================================================================================
# states against Statevector, row by row
@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("name", list(FEATURE_MAPS))
def test_batched_states_match_statevector(name, dtype):
    qc, inputs, trainable = _model(name)
    w0 = _weights(len(trainable), 0)
    c, fm = tql.Circuit.from_qiskit(qc, inputs=inputs, trainable=trainable, initial_weights=w0, dtype=dtype,
                                    return_feature_map=True)
    assert isinstance(fm, DerivedFeatures) and fm.in_features == 3 and fm.passthrough == 3
    assert c.n_inputs == fm.out_features == 3 + len(fm.expressions)
    x = torch.as_tensor(np.random.default_rng(1).uniform(-1.2, 1.2, (5, 3)), dtype=REAL[dtype])
    psi = c(fm(x))
    assert psi.shape == (5, 8) and psi.dtype == dtype
    for row, f in zip(psi, x.tolist()):
        want = _state(qc, dict(zip(inputs, f)) | dict(zip(trainable, w0)))
        err = (row.to(torch.complex128) - want).abs().max().item()
        assert err <= TOL[dtype], f"max |tql - qiskit| = {err:.3g}"


def test_each_distinct_expression_is_one_column():
    qc, inputs, _ = _model("zz_default")
    _, fm = tql.Circuit.from_qiskit(qc, inputs=inputs, return_feature_map=True)
    assert len(fm.expressions) == 3                          # three pairs; reps=2 repeats them
    qc, inputs, trainable = _model("hand_made")
    c, fm = tql.Circuit.from_qiskit(qc, inputs=inputs, trainable=trainable, return_feature_map=True)
    # x0·x1 (phase, rzz and U's θ), x0² (rx and the inverted ry), sqrt|x0| + 1, x1·x2 − 0.4, sin x2,
    # x2³/4 (the 1/4 is the gate's scale) and x2²
    assert len(fm.expressions) == 7, fm.expressions
    square = fm.passthrough + fm.expressions.index("x[0]**2")
    scales = {a.scale for op in c.ops for a in op.angles if isinstance(a, tql.Input) and a.column == square}
    assert scales == {1.0, -1.0}                             # rx(x0²) and the inverse of ry(x0²)


def test_affine_circuits_are_unchanged():
    x = ParameterVector("x", 2)
    qc = QuantumCircuit(2)
    qc.ry(2 * x[0] - 1, 0)
    qc.rz(x[1], 1)
    c = tql.Circuit.from_qiskit(qc, inputs=x, dtype=torch.complex128)
    assert isinstance(c, tql.Circuit)
    c2, fm = tql.Circuit.from_qiskit(qc, inputs=x, dtype=torch.complex128, return_feature_map=True)
    feats = torch.tensor([[0.3, -0.8]], dtype=torch.float64)
    assert fm(feats) is feats and fm.expressions == ()       # nothing derived: the features as they are
    assert torch.equal(c2(fm(feats)), c(feats))


def test_a_dropped_global_phase_leaves_no_unread_column():
    x = ParameterVector("x", 2)
    qc = QuantumCircuit(2, global_phase=x[0] ** 3)
    qc.h([0, 1])
    qc.rzz(x[0] * x[1], 0, 1)
    c, fm = tql.Circuit.from_qiskit(qc, inputs=x, global_phase=False, return_feature_map=True,
                                    dtype=torch.complex128)
    assert fm.expressions == ("x[0]*x[1]",) and fm.out_features == c.n_inputs == 3
    layer = qiskit_interop.layer_from_qiskit(qc, SparsePauliOp("XX"), inputs=x, global_phase=False)
    assert layer(torch.rand(4, 2)).shape == (4, 1)


# =============================================================================================
# gradients against central finite differences of Qiskit's expectation values
OP = SparsePauliOp.from_sparse_list([("ZZ", [0, 1], 0.7), ("X", [2], -0.4), ("YZ", [0, 2], 0.3)], 3)


@pytest.mark.parametrize("name", ["zz_default", "hand_made"])
def test_gradients_in_x_and_weights_match_finite_differences(name):
    qc, inputs, trainable = _model(name)
    w0 = _weights(len(trainable), 2)
    f0 = np.random.default_rng(3).uniform(-1.2, 1.2, 3)
    c, fm = tql.Circuit.from_qiskit(qc, inputs=inputs, trainable=trainable, initial_weights=w0,
                                    dtype=torch.complex128, return_feature_map=True)
    H = qiskit_interop.hamiltonian_from_sparse_pauli_op(OP)
    x = torch.tensor(f0.reshape(1, 3), requires_grad=True)
    energy = tql.expval(c, H, x=fm(x)).sum()
    energy.backward()

    def qiskit_energy(f, w):
        values = dict(zip(inputs, f)) | dict(zip(trainable, w))
        return Statevector(qc.assign_parameters(values)).expectation_value(OP).real

    assert abs(energy.item() - qiskit_energy(f0, w0)) < 1e-12

    def central(g, at, h=1e-4):
        # the 5-point stencil: the derived angles reach ~35 rad, so the 3-point one's h² error
        # (through d³E/dx³) would dominate a 1e-8 comparison
        return np.array([(8 * (g(at + h * e) - g(at - h * e)) - g(at + 2 * h * e) + g(at - 2 * h * e)) / (12 * h)
                         for e in np.eye(len(at))])

    fd_x = central(lambda f: qiskit_energy(f, w0), f0)
    fd_w = central(lambda w: qiskit_energy(f0, w), w0)
    assert np.abs(x.grad.numpy()[0] - fd_x).max() < 1e-8
    assert np.abs(c.weights.grad.numpy() - fd_w).max() < 1e-8


# =============================================================================================
# layer_from_qiskit: TorchConnector(EstimatorQNN(...)) as one QuantumLayer
def test_layer_from_qiskit_matches_qiskit_and_trains_behind_a_linear_layer():
    fmap = _library("zz_feature_map", "ZZFeatureMap", 3, reps=2)
    ansatz = _library("real_amplitudes", "RealAmplitudes", 3, reps=1)
    qc = fmap.compose(ansatz)
    w0 = _weights(ansatz.num_parameters, 4)
    layer = qiskit_interop.layer_from_qiskit(qc, [OP, SparsePauliOp("IIZ")], inputs=fmap.parameters,
                                             trainable=ansatz.parameters, initial_weights=w0,
                                             dtype=torch.complex128)
    assert isinstance(layer, tql.QuantumLayer) and isinstance(layer.input_map, DerivedFeatures)
    assert layer.n_inputs == 3 and layer.n_outputs == 2
    f = torch.tensor([[0.4, -0.9, 1.1]], dtype=torch.float64)
    values = dict(zip(fmap.parameters, f[0].tolist())) | dict(zip(ansatz.parameters, w0))
    sv = Statevector(qc.assign_parameters(values))
    want = [sv.expectation_value(OP).real, sv.expectation_value(SparsePauliOp("IIZ")).real]
    assert np.abs(layer(f).detach().numpy()[0] - want).max() < 1e-12

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 3), layer).double()
    data = torch.rand(16, 2, dtype=torch.float64) * 2 - 1
    target = torch.stack([0.5 * torch.sin(3 * data[:, 0]), 0.5 * data[:, 1]], 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(12):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(data), target)
        loss.backward()
        if not losses:          # the gradient reaches the linear layer through the derived columns
            assert model[0].weight.grad.abs().min() > 0
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses


def test_layer_from_qiskit_of_an_affine_circuit_reads_one_column_per_input():
    x = ParameterVector("x", 3)
    qc = QuantumCircuit(2)
    qc.ry(x[0], 0)
    qc.rx(x[1], 1)                          # x[2] unused: TorchConnector still takes 3 columns
    layer = qiskit_interop.layer_from_qiskit(qc, SparsePauliOp("ZZ"), inputs=x, dtype=torch.complex128)
    assert layer.n_inputs == 3
    out = layer(torch.tensor([[0.3, 0.7, 5.0]], dtype=torch.float64))
    assert out.shape == (1, 1) and abs(out.item() - np.cos(0.3) * np.cos(0.7)) < 1e-12


# =============================================================================================
# the feature module itself
def test_derived_features_module_dtype_shape_and_copies():
    x = ParameterVector("x", 2)
    fm = DerivedFeatures(x, [x[0] * x[1], (x[0] - np.pi) ** 2, sympy.sqrt(sympy.Symbol("x[1]")) + sympy.E])
    assert fm.out_features == 5 and len(list(fm.parameters())) == 0 and fm.state_dict() == {}
    a = torch.tensor([[0.5, 2.0], [-1.0, 0.25]], dtype=torch.float32)
    out = fm(a)
    assert out.dtype == torch.float32 and out.shape == (2, 5)
    want = torch.stack([a[:, 0] * a[:, 1], (a[:, 0] - np.pi) ** 2, a[:, 1].sqrt() + np.e], 1)
    assert torch.allclose(out[:, 2:], want) and torch.equal(out[:, :2], a)
    assert torch.allclose(fm(a[0]), out[0])                 # (F,) as well as (B, F)
    for other in (copy.deepcopy(fm), pickle.loads(pickle.dumps(fm))):
        assert torch.equal(other(a), out)
    with pytest.raises(ValueError, match="2 feature column"):
        fm(torch.zeros(3, 4))
    with pytest.raises(TypeError, match="real floating"):
        fm(torch.zeros(3, 2, dtype=torch.int64))


# =============================================================================================
# refusals: each names the expression / parameter at fault
def test_without_the_flag_the_refusal_points_to_it():
    fmap = _library("zz_feature_map", "ZZFeatureMap", 2, reps=1)
    with pytest.raises(ValueError, match=r"'p'.*\(-3\.14\d* \+ x\[0\]\)\*.*'x\[0\]'.*return_feature_map=True"
                                         r".*layer_from_qiskit"):
        tql.Circuit.from_qiskit(fmap, inputs=fmap.parameters)


def test_trainable_inside_a_non_affine_expression_is_refused():
    x, th = Parameter("x"), Parameter("θ")
    qc = QuantumCircuit(1)
    qc.rx((x + th).sin(), 0)
    with pytest.raises(ValueError, match=r"sin\(x \+ θ\).*not affine.*trainable parameter 'θ'"):
        tql.Circuit.from_qiskit(qc, inputs=[x], return_feature_map=True)


def test_trainable_times_input_is_refused():
    x, th = Parameter("x"), Parameter("θ")
    qc = QuantumCircuit(1)
    qc.ry(x ** 2 + th * x, 0)
    with pytest.raises(ValueError, match=r"`.*θ.*`.*trainable parameter 'θ' is multiplied by .*'x'"):
        qiskit_interop.layer_from_qiskit(qc, SparsePauliOp("Z"), inputs=[x])


def test_non_affine_trainable_without_inputs_is_refused():
    a = Parameter("alpha")
    qc = QuantumCircuit(1)
    qc.rz(a ** 2, 0)
    with pytest.raises(ValueError, match=r"'rz'.*alpha\*\*2.*trainable parameter 'alpha'"):
        tql.Circuit.from_qiskit(qc, return_feature_map=True)


def test_complex_expression_is_refused():
    x = ParameterVector("x", 2)
    qc = QuantumCircuit(1)
    qc.rx(1j * x[0] * x[1], 0)
    with pytest.raises(ValueError, match=r"'rx'.*not real"):
        tql.Circuit.from_qiskit(qc, inputs=x, return_feature_map=True)


def test_unsupported_function_is_refused():
    a = sympy.Symbol("a")
    with pytest.raises(ValueError, match=r"`a\*floor\(a\)`.*floor\(a\)"):
        DerivedFeatures(["a"], [a * sympy.floor(a)])
    with pytest.raises(ValueError, match=r"`b\*\*2`.*`b` is not an input"):
        DerivedFeatures(["a"], [sympy.Symbol("b") ** 2])


def test_without_sympy_the_refusal_stays_a_value_error(monkeypatch):
    fmap = _library("zz_feature_map", "ZZFeatureMap", 2, reps=1)
    monkeypatch.setitem(sys.modules, "sympy", None)
    with pytest.raises(ValueError, match=r"not affine.*'x\[0\]'.*needs sympy"):
        tql.Circuit.from_qiskit(fmap, inputs=fmap.parameters)
    with pytest.raises(ModuleNotFoundError, match=r"torchquantum-layers\[qiskit\]"):
        tql.Circuit.from_qiskit(fmap, inputs=fmap.parameters, return_feature_map=True)


# =============================================================================================
# the one-program evaluation of all expressions against NumPy, expression by expression
def _wide_data_map(v):
    """sin, cos, exp, log, abs, sqrt and integer / fractional powers, for 1-, 2- and 3-qubit terms."""
    if len(v) == 1:
        return v[0].sin() * (v[0] ** 2 + 1).log() + v[0].abs() ** 0.5
    if len(v) == 2:
        return (v[0] - v[1]).cos() * (0.3 * v[0]).exp() + (v[0] * v[1]) ** 3 - (v[1] ** 2 + 0.5) ** 1.5
    return v[0].exp() * v[1].cos() * v[2].sin() / (v[0] ** 2 + 2)


ORACLE_MAPS = {
    "zz8_reps2": lambda: _library("zz_feature_map", "ZZFeatureMap", 8, reps=2),
    "pauli_zzz": lambda: _library("pauli_feature_map", "PauliFeatureMap", 4, reps=2, paulis=["Z", "ZZ", "ZZZ"]),
    "custom_wide": lambda: _library("pauli_feature_map", "PauliFeatureMap", 3, reps=1, paulis=["Z", "ZZ", "ZZZ"],
                                    data_map_func=_wide_data_map),
}


def _gate_expressions(qc):
    """Every distinct parameterised gate angle of ``qc`` as sympy, in circuit order."""
    seen = {}
    for inst in qc.data:
        for p in inst.operation.params:
            if isinstance(p, qiskit.circuit.ParameterExpression) and p.parameters:
                seen.setdefault(sympy.sympify(p.sympify()), None)
    return list(seen)


def _numpy_oracle(symbols, expressions, x: np.ndarray) -> np.ndarray:
    """Each expression on its own, by sympy.lambdify in float64: (..., F) -> (..., len(expressions))."""
    columns = [x[..., j] for j in range(x.shape[-1])]
    out = []
    for e in expressions:
        value = sympy.lambdify(symbols, e, "numpy")(*columns)
        out.append(np.broadcast_to(np.asarray(value, dtype=np.float64), x.shape[:-1]))
    return np.stack(out, -1)


def _check_against_oracle(fm, symbols, expressions, x: torch.Tensor, rtol: float):
    got = fm(x)
    assert got.dtype == x.dtype and got.shape == (*x.shape[:-1], fm.passthrough + len(expressions))
    x64 = x.double().cpu().numpy()
    want = np.concatenate([x64[..., :fm.passthrough], _numpy_oracle(symbols, expressions, x64)], -1)
    err = np.abs(got.double().cpu().numpy() - want) / (1.0 + np.abs(want))
    worst = np.unravel_index(err.argmax(), err.shape)
    assert err.max() <= rtol, f"max relative error {err.max():.3g} at {worst}"


RTOL = {torch.float32: 1e-6, torch.float64: 2e-14}       # float rounding, through values up to ~35


@pytest.mark.parametrize("real", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(ORACLE_MAPS))
def test_all_expressions_at_once_match_numpy_one_by_one(name, real):
    qc = ORACLE_MAPS[name]()
    inputs = list(qc.parameters)
    symbols = [sympy.Symbol(p.name) for p in inputs]
    expressions = _gate_expressions(qc)
    fm = DerivedFeatures(inputs, expressions)
    x = torch.as_tensor(np.random.default_rng(5).uniform(-1.2, 1.2, (17, len(inputs))), dtype=real)
    _check_against_oracle(fm, symbols, expressions, x, RTOL[real])
    # and from_qiskit's map: the non-affine angles less their numeric factor, once each
    _, fq = tql.Circuit.from_qiskit(qc, inputs=inputs, return_feature_map=True)
    cores = {str(core): core for e in expressions for core in [e.as_coeff_Mul()[1]]}
    assert fq.expressions and set(fq.expressions) <= set(cores)
    _check_against_oracle(fq, symbols, [cores[t] for t in fq.expressions], x, RTOL[real])


def _odd_expressions():
    """Shared subtrees, a constant, a bare input, a repeated expression, (a² + 1)**b and 2**c
    (powers with an input exponent), mixed exponents at one depth, conjugate, sign, tan/atan/
    tanh/..., and an expression that reads another's subtree at a different depth."""
    a, b, c = sympy.symbols("a b c")
    s = sympy.sin(a * b)
    return [a, b, c], [
        s, s ** 2 + c, sympy.exp(s) * sympy.cos(c), (a ** 2 + 1) ** b, 2 ** c, a ** 3 - b ** 2 + c ** 4,
        sympy.Integer(3) / 7, b, s, sympy.conjugate(a) * c, sympy.sign(a) * b ** 2, sympy.tan(a) + sympy.atan(b),
        sympy.tanh(c) * sympy.cosh(a) - sympy.sinh(b), sympy.asin(a / 2) + sympy.acos(b / 2),
        sympy.sqrt(a ** 2 + b ** 2 + c ** 2), sympy.log(sympy.Abs(a * b * c) + 1) / (1 + c ** 2), 5 * a * b - 2 * c,
        (a - b) * (b - c) * (c - a) * sympy.pi, sympy.E ** (-a ** 2)]


@pytest.mark.parametrize("real", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("passthrough", [3, 1, 0])
def test_odd_expressions_leading_dims_and_passthrough_match_numpy(real, passthrough, device):
    symbols, expressions = _odd_expressions()
    fm = DerivedFeatures([s.name for s in symbols], expressions, passthrough=passthrough)
    assert fm.out_features == passthrough + len(expressions)
    x = torch.as_tensor(np.random.default_rng(6).uniform(-1.2, 1.2, (2, 5, 3)), dtype=real).to(device)
    _check_against_oracle(fm, symbols, expressions, x, RTOL[real])
    assert torch.allclose(fm(x[1, 2]), fm(x)[1, 2], rtol=1e-6, atol=0)          # (F,) as well
    assert fm(x[:0]).shape == (0, 5, fm.out_features)
    alone = DerivedFeatures([s.name for s in symbols], expressions[6:7], passthrough=passthrough)
    assert torch.equal(alone(x)[..., -1], torch.full((2, 5), 3 / 7, dtype=real, device=device))   # a constant


def test_gradients_of_all_expressions_pass_gradcheck():
    symbols, expressions = _odd_expressions()
    fm = DerivedFeatures([s.name for s in symbols], expressions, passthrough=2)
    x = torch.tensor([[0.7, -0.4, 1.1], [-0.3, 0.9, 0.5]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(fm, (x,))
    qc = ORACLE_MAPS["custom_wide"]()
    fm = DerivedFeatures(list(qc.parameters), _gate_expressions(qc))
    assert torch.autograd.gradcheck(fm, (x,))


def test_the_program_pickles_without_its_tensors_and_old_pickles_still_load():
    symbols, expressions = _odd_expressions()
    fm = DerivedFeatures([s.name for s in symbols], expressions)
    x = torch.rand(4, 3, dtype=torch.float64)
    want = fm(x)
    assert fm.state_dict() == {} and fm._tensors                  # tensors of the plan, cached per dtype
    for other in (copy.deepcopy(fm), pickle.loads(pickle.dumps(fm))):
        assert other._tensors == {} and torch.equal(other(x), want)
    state = fm.__getstate__()                                    # as pickled before the one program
    del state["_plan"], state["_tensors"]
    old = DerivedFeatures.__new__(DerivedFeatures)
    old.__setstate__(state)
    assert torch.equal(old(x), want)


def test_tensors_cached_in_inference_mode_still_train():
    symbols, expressions = _odd_expressions()
    fm = DerivedFeatures([s.name for s in symbols], expressions)
    x = torch.tensor([[0.7, -0.4, 1.1]], dtype=torch.float64)
    with torch.inference_mode():
        first = fm(x)
    xg = x.clone().requires_grad_()
    out = fm(xg)
    out.sum().backward()
    assert torch.equal(out.detach(), first) and torch.isfinite(xg.grad).all()


def test_dispatches_grow_with_depth_not_with_the_number_of_expressions():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    def dispatches(qubits):
        fmap = _library("zz_feature_map", "ZZFeatureMap", qubits, reps=2)
        _, fm = tql.Circuit.from_qiskit(fmap, inputs=fmap.parameters, return_feature_map=True)
        x = torch.rand(8, qubits, requires_grad=True)
        fm(x)                                                  # the plan's tensors, once
        with Count() as count:
            fm(x).sum().backward()
        return len(fm.expressions), count.n

    (m4, n4), (m12, n12) = dispatches(4), dispatches(12)
    assert (m4, m12) == (6, 66) and n12 == n4 <= 24, (n4, n12)      # 19 in torch 2.13
