"""QCNN template (torchquantum_layers/qcnn.py): the schedule written out by hand, states against a
dense NumPy simulation of the same gates (tests/oracle.py), gradcheck, the QuantumLayer readout,
and a phase-classification run on transverse-field Ising ground states from NumPy's eigh."""
import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers.qcnn import qcnn_schedule

from . import oracle as O


def test_schedule_and_readout_by_hand():
    assert qcnn_schedule(range(4)) == [([0, 1, 2, 3], [(0, 1), (2, 3)]), ([1, 3], [(1, 3)])]
    assert tql.templates.qcnn_readout_wires(4) == [3]
    assert tql.templates.qcnn_readout_wires(8) == [7]
    # 5 wires down to 2: the odd wire passes on; the second level pools one pair only
    assert qcnn_schedule(range(5), 2) == [([0, 1, 2, 3, 4], [(0, 1), (2, 3)]), ([1, 3, 4], [(1, 3)])]
    assert tql.templates.qcnn_readout_wires(5, 2) == [3, 4]
    assert tql.templates.qcnn_readout_wires([6, 2, 4]) == [4]          # wires in the given order


def _su4(t):
    u = np.kron(O.u3(*t[0:3]), O.u3(*t[3:6]))
    u = O.gate_matrix("RZZ", t[8]) @ O.gate_matrix("RYY", t[7]) @ O.gate_matrix("RXX", t[6]) @ u
    return np.kron(O.u3(*t[9:12]), O.u3(*t[12:15])) @ u


def _ry_cnot(t):
    return O.gate_matrix("CNOT") @ np.kron(O.ry(t[0]), O.ry(t[1]))


def _pool(t1, t2):
    """CRZ(t1), X on the control, CRX(t2): the rotation of the target picked by the control."""
    P0, P1 = np.diag([1.0, 0.0]), np.diag([0.0, 1.0])
    crz = np.kron(P0, np.eye(2)) + np.kron(P1, O.rz(t1))
    crx = np.kron(P0, np.eye(2)) + np.kron(P1, O.rx(t2))
    return crx @ np.kron(O.X, np.eye(2)) @ crz


def _oracle_state_4(conv, w):
    """The 4-wire QCNN by hand: level 1 blocks on (0,1), (2,3), (1,2), (3,0) with one shared set,
    pools 0→1 and 2→3; level 2 block on (1,3), pool 1→3. Angles in creation order."""
    block, k = {"su4": (_su4, 15), "ry_cnot": (_ry_cnot, 2)}[conv]
    psi = np.zeros(16, dtype=complex)
    psi[0] = 1
    t, w = w[:k], w[k:]
    for pair in [(0, 1), (2, 3), (1, 2), (3, 0)]:
        psi = O.apply_dense(psi, block(t), pair, 4)
    (p1, p2), w = w[:2], w[2:]
    psi = O.apply_dense(psi, _pool(p1, p2), (0, 1), 4)
    psi = O.apply_dense(psi, _pool(p1, p2), (2, 3), 4)
    t, w = w[:k], w[k:]
    psi = O.apply_dense(psi, block(t), (1, 3), 4)
    psi = O.apply_dense(psi, _pool(*w[:2]), (1, 3), 4)
    assert len(w) == 2
    return psi


@pytest.mark.parametrize("conv", ["su4", "ry_cnot"])
def test_state_matches_dense_oracle(conv, dtype, device, atol):
    c = tql.templates.qcnn(4, conv=conv).to(device)
    c = c.double() if dtype == torch.complex128 else c
    k = tql.qcnn.CONV_BLOCKS[conv]
    assert c.num_parameters == 2 * (k + 2)                 # shared: not one set per pair
    rng = np.random.default_rng(0)
    w = rng.uniform(-np.pi, np.pi, c.num_parameters)
    with torch.no_grad():
        c.weights.copy_(torch.as_tensor(w))
    got = c().detach().cpu().numpy()[0]
    np.testing.assert_allclose(got, _oracle_state_4(conv, w), atol=10 * atol)


def test_more_conv_layers_and_no_pooling():
    c = tql.templates.qcnn(8, conv="ry_cnot", n_conv=2)
    assert c.num_parameters == 3 * (2 * 2 + 2)
    c0 = tql.templates.qcnn(8, conv="ry_cnot", pooling=False)
    assert c0.num_parameters == 3 * 2 and "CRZ" not in c0.count_ops()


def test_layer_reads_the_readout_wire_and_gradcheck():
    torch.manual_seed(0)
    layer = tql.QuantumLayer.from_template(4, 1, ansatz="qcnn", dtype=torch.complex128)
    assert [str(o) for o in layer.observables] == [str(tql.Hamiltonian("Z3"))]
    x = torch.rand(3, 4, dtype=torch.float64)
    w = layer.circuit.weights.detach().numpy()
    want = []
    for row in x.numpy():       # RY angle encoding, then the QCNN, then <Z_3>
        psi = np.zeros(16, dtype=complex)
        psi[0] = 1
        for wire in range(4):
            psi = O.apply_dense(psi, O.ry(row[wire]), (wire,), 4)
        u = _oracle_unitary_4(w)
        out = u @ psi
        want.append(np.real(np.vdot(out, O.full_operator(O.Z, (3,), 4) @ out)))
    torch.testing.assert_close(layer(x)[:, 0], torch.tensor(want, dtype=torch.float64), atol=1e-10, rtol=0)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: layer(x), (x,))


def _oracle_unitary_4(w):
    cols = []
    for b in range(16):
        e = np.zeros(16, dtype=complex)
        e[b] = 1
        cols.append(_oracle_from(e, w))
    return np.stack(cols, 1)


def _oracle_from(psi, w):
    block = _su4
    t, w = w[:15], w[15:]
    for pair in [(0, 1), (2, 3), (1, 2), (3, 0)]:
        psi = O.apply_dense(psi, block(t), pair, 4)
    for pair in [(0, 1), (2, 3)]:
        psi = O.apply_dense(psi, _pool(w[0], w[1]), pair, 4)
    w = w[2:]
    psi = O.apply_dense(psi, block(w[:15]), (1, 3), 4)
    return O.apply_dense(psi, _pool(w[15], w[16]), (1, 3), 4)


def _tfim_ground_states(n, fields):
    """Ground states of -Σ Z_i Z_(i+1) (ring) - h Σ X_i from dense NumPy matrices."""
    zz = sum(O.full_operator(np.kron(O.Z, O.Z), (i, (i + 1) % n), n) for i in range(n))
    xs = sum(O.full_operator(O.X, (i,), n) for i in range(n))
    states = []
    for h in fields:
        _, vecs = np.linalg.eigh(-zz - h * xs)
        states.append(vecs[:, 0])
    return np.stack(states)


def test_qcnn_learns_the_ising_phases():
    """Ordered (h < 1) against paramagnetic (h > 1) ground states; ⟨Z⟩ on the readout wire gives
    the label's sign. The ordered ground state is a cat state: a single-wire Z cannot read the
    order, so the QCNN has to learn a nonlocal feature."""
    n = 4
    fields = np.concatenate([np.linspace(0.1, 0.6, 6), np.linspace(1.6, 3.0, 6)])
    labels = torch.tensor([1.0] * 6 + [-1.0] * 6, dtype=torch.float64)
    states = torch.as_tensor(_tfim_ground_states(n, fields), dtype=torch.complex128)
    torch.manual_seed(1)
    c = tql.templates.qcnn(n, init="small").double()
    readout = tql.Hamiltonian(f"Z{tql.templates.qcnn_readout_wires(n)[0]}")
    opt = torch.optim.Adam(c.parameters(), lr=0.1)
    for _ in range(80):
        opt.zero_grad()
        loss = (tql.expval(c, readout, state=states) - labels).pow(2).mean()
        loss.backward()
        opt.step()
    with torch.no_grad():
        pred = torch.sign(tql.expval(c, readout, state=states))
    assert torch.equal(pred, labels), (loss.item(), pred)


def test_bad_input():
    with pytest.raises(ValueError, match="conv must be one of"):
        tql.templates.qcnn(4, conv="so4")
    with pytest.raises(ValueError, match="n_readout=4 must be smaller than the 4 wires"):
        tql.templates.qcnn(4, n_readout=4)
    with pytest.raises(TypeError, match="pooling must be True or False"):
        tql.templates.qcnn(4, pooling="yes")
    with pytest.raises(ValueError, match="n_conv"):
        tql.templates.qcnn(4, n_conv=0)
    with pytest.raises(ValueError, match="n_readout"):
        tql.templates.qcnn(4, n_readout=0)
    with pytest.raises(ValueError, match="cannot follow each re-uploading block"):
        tql.QuantumLayer.from_template(4, 1, encoding="reupload", ansatz="qcnn")
    with pytest.raises(TypeError, match="clashes with n_layers"):
        tql.QuantumLayer.from_template(4, 1, ansatz="qcnn", ansatz_kwargs={"n_conv": 2})
