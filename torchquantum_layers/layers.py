"""``QuantumLayer``: a circuit plus observables as a drop-in ``nn.Module``.

>>> layer = tql.QuantumLayer.from_template(4, 2)          # RY angle encoding, RY+CNOT ansatz, ⟨Z_w⟩
>>> model = nn.Sequential(nn.Linear(8, 4), layer, nn.Linear(4, 3))

The layer maps ``(B, F)`` real features to ``(B, n_obs)`` expectation values in the input's float
dtype (``(F,)`` to ``(n_obs,)``). Its only trainable tensor is ``circuit.weights``, so it takes part
in ``state_dict``, optimizers, ``.to(device)``, ``.double()``, ``copy.deepcopy``, ``pickle`` and
``DistributedDataParallel`` like any other module.

With a ``noise_model`` (a :class:`~tql.NoiseModel`) the layer runs on a noisy device model: exact
density matrices (``simulator="density"``) or sampled trajectories (``"trajectories"``), optionally
read out through readout errors and mitigated (``mitigation="readout"``, ``"zne"``).
A pure layer on many qubits runs as a matrix-product state with ``simulator="mps"`` (``max_bond``,
``cutoff``; :mod:`tql.mps`).
"""
from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import nn

from . import templates as T
from .circuit import Circuit
from .grad import _observable_list, check_diff_method, circuit_expval, resolve_diff_method

__all__ = ["QuantumLayer", "IQPFeatures", "ENCODINGS", "ANSATZE", "SIMULATORS", "MITIGATIONS",
           "MAX_DENSITY_WIRES"]

SIMULATORS = ("density", "trajectories", "mps")
MITIGATIONS = ("readout", "zne", "zne+readout")
# ρ of n qubits holds 4**n amplitudes: 12 qubits are 128 MiB per sample in complex64 (4 GiB for a
# batch of 32); beyond that trajectories (2**n per row) are the way
MAX_DENSITY_WIRES = 12
_ZNE_EXTRAPOLATIONS = ("richardson", "linear", "exponential")     # "polynomial" needs an order
ENCODINGS = ("angle", "iqp", "reupload", "none")
ANSATZE = ("hardware_efficient", "strongly_entangling", "basic_entangler", "rxryrz_ring", "qcnn", "none")
_PAULI_LETTERS = ("X", "Y", "Z")


class IQPFeatures(nn.Module):
    """``(B, n)`` → ``(B, n + n(n-1)/2)``: the features followed by their pairwise products, the
    columns :func:`templates.iqp_encoding` reads (see :func:`templates.iqp_features`)."""

    def __init__(self, n_features: int):
        super().__init__()
        self.in_features = int(n_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return T.iqp_features(x, self.in_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}"


def _check_int(value, name, what, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: {name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{what}: {name} must be >= {minimum}, got {value}")
    return value


def _measure_observables(measure, n_wires, wires=None):
    """``"Z"`` (or ``"X"``/``"Y"``): that Pauli on every wire (on ``wires`` where given); anything
    else is passed through."""
    if isinstance(measure, str) and measure.strip().upper() in _PAULI_LETTERS:
        letter = measure.strip().upper()
        return [f"{letter}{w}" for w in (range(n_wires) if wires is None else wires)]
    return measure


class QuantumLayer(nn.Module):
    """``(B, F)`` real features → ``(B, n_obs)`` expectation values, same float dtype as the input.

    Args:
        circuit: a :class:`~torchquantum_layers.Circuit`; its input angles (``Input`` columns) read
            the features, its ``weights`` are the layer's trainable parameters.
        observables: a list of PauliStrings / Hamiltonians / strings (one output column each), or
            one of them (then the output has one column).
        diff_method: ``"backprop"`` (default), ``"adjoint"`` or ``"parameter-shift"``; values and
            gradients (w.r.t. the weights and the input features) are the same, only cost differs.
            With ``shots`` the default is ``"parameter-shift"``, the only one that differentiates
            sampled estimates.
        dtype: simulation dtype, ``torch.complex64`` (default of a new Circuit) or
            ``torch.complex128`` (``float32``/``float64`` name the same); converts the circuit in
            place. ``layer.double()`` / ``layer.float()`` do the same later.
        shots: ``None`` for exact expectations, or a positive int: every forward pass returns
            shot-sampled estimates (as hardware would), drawn from a generator seeded with ``seed``
            on first use (``seed=None`` draws from torch's global RNG, so ``torch.manual_seed``
            makes runs reproducible). The generator is not part of ``state_dict``; a copy of the
            layer restarts its sequence from ``seed``.
        input_map: optional ``nn.Module`` applied to ``x`` before the circuit (e.g.
            :class:`IQPFeatures`); ``F`` is then checked against its ``in_features`` (for an
            ``nn.Sequential``, its first module's); a map without one (``nn.Tanh()``) takes any
            ``F``. Its output must have exactly the circuit's input columns (``circuit.n_inputs``):
            a map returning more would have its extra columns silently ignored, so that is an
            error naming both widths.
        noise_model: ``None`` (a pure state), or a :class:`~tql.NoiseModel`: channels after
            matching gates, and readout errors (``add_readout_error``) through which every value
            is read. It is configuration, not state: it stays out of ``state_dict`` (build it
            again, or from plain data with ``lightning_tasks.noise_spec.noise_model_from_spec``,
            when loading weights); ``copy.deepcopy`` and ``pickle`` copy it with the layer. For a
            :class:`~tql.MixedCircuit` it replaces the circuit's own ``noise_model`` (its
            channels, measurements and resets stay); a MixedCircuit alone is noisy too.
        simulator: how a noisy layer computes its values. ``"density"`` (default): exact
            ``Tr(O ρ)`` on one ``(B, 2**n, 2**n)`` batch of density matrices (at most
            ``MAX_DENSITY_WIRES`` = 12 wires). ``"trajectories"``: the mean of ``n_trajectories``
            sampled state-vector trajectories per sample (``(B·T, 2**n)`` rows, one batch),
            an unbiased estimate of the same value and of its gradient, seeded by ``seed``
            like shots (``seed=None``: torch's global RNG); every forward pass draws new ones.
            ``"mps"`` (a noiseless layer only): the pure state as a matrix-product state
            (:func:`tql.mps.expval`), for wide, shallow circuits beyond the state vector's reach;
            exact expectations, differentiated by backprop (``diff_method`` None, ``"auto"`` or
            ``"backprop"``); no shots, no noise model, gates of at most 4 wires.
        max_bond, cutoff: the MPS truncation (``simulator="mps"`` only; defaults 64 and 1e-10):
            each SVD keeps at most ``max_bond`` singular values and drops the tail whose weight
            ``Σ s²/‖s‖²`` stays within ``cutoff``. Like the simulator they are constructor
            arguments, not ``state_dict`` entries.
        n_trajectories: trajectories per sample (default 64; ``simulator="trajectories"`` only).
        mitigation: ``None``; ``"readout"`` (each observable replaced by the noise model's
            ``readout.mitigated_observable``, so the value read through the readout errors is the
            pre-readout one); ``"zne"`` (zero-noise extrapolation, :func:`tql.mixed.zne_expval`:
            the circuit globally folded to ``zne_scale_factors``, default ``(1, 3, 5)``,
            extrapolated by ``zne_extrapolation``: ``"richardson"`` (default), ``"linear"`` or
            ``"exponential"``); or ``"zne+readout"``. Values and gradients are the mitigated ones.

    Differentiation of a noisy layer (values and gradients w.r.t. the weights and the inputs):
    ``"backprop"`` always (the default; ``"auto"`` resolves to it, or to ``"parameter-shift"``
    with shots); ``"parameter-shift"`` on density matrices (the shift rule holds through channels
    that do not depend on the angles) and on trajectories whose noise is a mixture of unitaries
    (depolarizing, Pauli channels: each trajectory is then a unitary circuit). ``"adjoint"`` is
    refused on density matrices (channels are not invertible, so ρ cannot be un-computed) and
    allowed on trajectories of such mixed-unitary noise only. ``shots`` sample the noisy
    distribution as read out (on trajectories, ``shots`` samples per trajectory).

    The input must be a real floating tensor of shape ``(B, F)`` or ``(F,)`` where ``F`` is the
    number of input columns the circuit reads (``layer.n_inputs``), on the circuit's device;
    anything else raises ``TypeError``/``ValueError`` naming the fault. The simulation runs in the
    circuit's dtype (the input is cast to its real dtype); the output is cast back to ``x.dtype``.

    ``torch.compile(model)`` works with every backend and diff method and gives the eager values
    and gradients (tested: ``backend="aot_eager"`` with the three diff methods; the default
    Inductor backend in a slow test). The simulation itself always runs eagerly, outside the
    compiled graph (the layer hands it to ``torch.compiler.disable`` while compiling):
    TorchInductor does not generate code for complex operators, and tracing the Python-level engine
    took seconds per circuit, graph-broke on its input checks and was no faster per step than eager
    (``aot_eager``, 4 qubits). Compiling therefore speeds up the classical layers around the
    quantum layer only. ``backend="aot_eager"`` (or ``"eager"``) compiles in a second or two; the
    default Inductor backend needs a C++ compiler and about ten seconds on the first call.

    ``DistributedDataParallel``: nothing special; the circuit's ``weights`` is an ordinary
    Parameter, all-reduced like the others (tested with two gloo processes).
    """

    def __init__(self, circuit: Circuit, observables, diff_method: Optional[str] = None, dtype=None,
                 shots: Optional[int] = None, seed: Optional[int] = None,
                 input_map: Optional[nn.Module] = None, noise_model=None, simulator: str = "density",
                 n_trajectories: Optional[int] = None, mitigation: Optional[str] = None,
                 zne_scale_factors=None, zne_extrapolation: Optional[str] = None,
                 max_bond: Optional[int] = None, cutoff: Optional[float] = None):
        super().__init__()
        if not isinstance(circuit, Circuit):
            raise TypeError(f"QuantumLayer: circuit must be a tql.Circuit, got {type(circuit).__name__}")
        noisy = _check_noise_model(noise_model) is not None or circuit.is_noisy
        self.max_bond, self.cutoff = _mps_options(circuit, noisy, simulator, shots, diff_method, max_bond, cutoff)
        if simulator == "mps" and diff_method in (None, "auto"):
            diff_method = "backprop"
        if shots is not None:
            if isinstance(shots, bool) or not isinstance(shots, int):
                raise TypeError(f"QuantumLayer: shots must be a positive int or None, got {shots!r}")
            if shots < 1:
                raise ValueError(f"QuantumLayer: shots must be a positive int or None, got {shots}")
        if diff_method is None:
            diff_method = "backprop" if shots is None else "parameter-shift"
        check_diff_method(diff_method)
        if shots is not None or noisy:  # "auto" is fixed now, as tql.expval / mixed.expval resolve it
            diff_method = resolve_diff_method(diff_method, circuit, shots=shots, density=noisy)
        self.diff_method = diff_method
        if shots is not None and diff_method != "parameter-shift":
            raise ValueError(f"QuantumLayer: shots={shots} needs diff_method='parameter-shift' (sampled "
                             f"estimates carry no autograd graph), got {diff_method!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"QuantumLayer: seed must be an int or None, got {seed!r}")
        if input_map is not None and not isinstance(input_map, nn.Module):
            raise TypeError(f"QuantumLayer: input_map must be an nn.Module, got {type(input_map).__name__}")
        self.circuit = circuit
        self.input_map = input_map
        self.observables, self._single = _observable_list(observables)
        for i, o in enumerate(self.observables):
            if o.n_wires > circuit.n_wires:
                raise ValueError(f"QuantumLayer: observable {i} ({o}) acts on wire {o.n_wires - 1} but the "
                                 f"circuit has {circuit.n_wires} wires")
            if not o.is_hermitian:
                raise ValueError(f"QuantumLayer: observable {i} ({o}) is not Hermitian")
        self.shots = shots
        self.seed = seed
        self._generator = None
        self._n_inputs_cache = None
        if dtype is not None:
            if dtype in (torch.complex128, torch.float64):
                self.circuit.double()
            elif dtype in (torch.complex64, torch.float32):
                self.circuit.float()
            else:
                raise TypeError(f"QuantumLayer: dtype must be torch.complex64 or torch.complex128, got {dtype}")
        self.noise_model = noise_model
        (self.simulator, self.n_trajectories, self.mitigation, self.zne_scale_factors,
         self.zne_extrapolation) = _noise_options(circuit, noisy, noise_model, simulator, n_trajectories, mitigation,
                                                  zne_scale_factors, zne_extrapolation, diff_method)
        self._mitigated = None          # (readout error, its mitigated observables), built on first use

    # ------------------------------------------------------------------------------------------
    @classmethod
    def from_template(cls, n_wires: int, n_layers: int, encoding: str = "angle",
                      ansatz: str = "hardware_efficient", measure="Z", *, n_features: Optional[int] = None,
                      encoding_kwargs: Optional[dict] = None, ansatz_kwargs: Optional[dict] = None,
                      init="uniform", diff_method: Optional[str] = None, dtype=None,
                      shots: Optional[int] = None, seed: Optional[int] = None, fuse: bool = True,
                      max_fused_wires: Optional[int] = None, noise_model=None, simulator: str = "density",
                      n_trajectories: Optional[int] = None, mitigation: Optional[str] = None,
                      zne_scale_factors=None, zne_extrapolation: Optional[str] = None,
                      max_bond: Optional[int] = None, cutoff: Optional[float] = None) -> "QuantumLayer":
        """One-line constructor: encoding, ``n_layers`` of an ansatz, and a measurement.

        ``encoding``:

        * ``"angle"`` (default): ``RY(x_i)`` on wire ``i`` (:func:`templates.angle_encoding`).
          ``n_features`` (default ``n_wires``) may be smaller than ``n_wires``: wire ``w`` then
          reads feature ``w % n_features``. ``encoding_kwargs``: ``rotation`` ("X"/"Y"/"Z"),
          ``scale`` (angle = scale·x).
        * ``"iqp"``: :func:`templates.iqp_encoding` on ``n_wires`` features; the layer computes the
          pairwise products itself (an :class:`IQPFeatures` input map), so ``F = n_wires``.
          ``encoding_kwargs``: ``n_repeats``, ``pattern`` ("all"/"linear"); nothing else (the
          input map fixes the columns), and ``"none"`` takes no ``encoding_kwargs``.
        * ``"reupload"``: data re-uploading: every layer encodes all ``n_features`` (default
          ``n_wires``, any number) features again, feature ``i`` on wire ``i % n_wires`` with axis
          ``encoding[(i // n_wires) % len(encoding)]`` (default ``("Y", "Z")``, as
          :func:`templates.data_reuploading`), then applies one layer of the ansatz
          (``hardware_efficient``: no final rotations unless ``final_rotations=True``, which adds one
          rotation layer after the last block; ``strongly_entangling``: ``ranges`` has one entry per
          layer). ``encoding_kwargs``: ``encoding`` (axes), ``scale``.
        * ``"none"``: no input; ``F = 0``.

        ``ansatz`` (all angles trainable, created with ``init``):

        * ``"hardware_efficient"``: :func:`templates.hardware_efficient` with its defaults
          (RY rotations, linear CNOT chain, a final rotation layer); ``ansatz_kwargs`` go to it
          (``rotations``, ``pattern``, ``entangler``, ``kind``, ``final_rotations``).
        * ``"rxryrz_ring"``: per layer ``RX, RY, RZ`` on every wire (wire by wire), then a ring of
          CNOTs ``(0,1), (1,2), …, (n-1,0)``; no final rotations. With ``encoding="angle"`` and
          ``measure="Z"`` this is the usual benchmark circuit. Weight ``3·(n·l + w) + k`` is the
          angle of gate ``k`` (RX, RY, RZ) on wire ``w`` in layer ``l``.
        * ``"strongly_entangling"``: :func:`templates.strongly_entangling`.
        * ``"basic_entangler"``: :func:`templates.basic_entangler` (``rotation`` kwarg).
        * ``"qcnn"``: :func:`templates.qcnn`, ``n_layers`` convolution layers per level;
          ``ansatz_kwargs``: ``conv`` ("su4"/"ry_cnot"), ``n_readout`` (default 1), ``pooling``. A
          Pauli-letter ``measure`` ("Z") then reads the readout wires only
          (:func:`templates.qcnn_readout_wires`), the others having been pooled away.
        * ``"none"``: no trainable gates.

        ``measure``: ``"Z"`` (⟨Z_w⟩ on every wire; ``"X"``, ``"Y"`` likewise) or a list of
        observables (PauliStrings, Hamiltonians or strings such as ``"Z0 Z1"``), or one observable.

        The remaining keywords go to :class:`QuantumLayer` (``diff_method``, ``dtype``, ``shots``,
        ``seed``, and the noise options ``noise_model``, ``simulator``, ``n_trajectories``,
        ``mitigation``, ``zne_scale_factors``, ``zne_extrapolation``; ``simulator="mps"`` with
        ``max_bond``, ``cutoff``) and to :class:`Circuit`
        (``fuse``, ``max_fused_wires``).
        """
        what = "QuantumLayer.from_template"
        n_wires = _check_int(n_wires, "n_wires", what)
        n_layers = _check_int(n_layers, "n_layers", what, minimum=0)
        if not isinstance(encoding, str) or encoding.lower() not in ENCODINGS:
            raise ValueError(f"{what}: encoding must be one of {ENCODINGS}, got {encoding!r}")
        if not isinstance(ansatz, str) or ansatz.lower() not in ANSATZE:
            raise ValueError(f"{what}: ansatz must be one of {ANSATZE}, got {ansatz!r}")
        encoding, ansatz = encoding.lower(), ansatz.lower()
        enc_kw = dict(encoding_kwargs or {})
        ans_kw = dict(ansatz_kwargs or {})
        for name, kw in (("encoding_kwargs", enc_kw), ("ansatz_kwargs", ans_kw)):
            if not all(isinstance(k, str) for k in kw):
                raise TypeError(f"{what}: {name} keys must be strings")
        explicit = {"n_layers": n_layers, "init": init}
        for key in sorted(ans_kw):
            if key in explicit:
                raise TypeError(f"{what}: ansatz_kwargs[{key!r}]={ans_kw[key]!r} clashes with the {key} "
                                f"argument ({explicit[key]!r}): give {key} once, as from_template's argument")
            if key == "circuit":
                raise TypeError(f"{what}: ansatz_kwargs['circuit'] clashes with the circuit from_template "
                                f"builds; use the templates directly to extend a circuit of your own")
        if n_features is not None:
            n_features = _check_int(n_features, "n_features", what)
        if encoding == "none" and n_features:
            raise ValueError(f"{what}: encoding='none' reads no features, got n_features={n_features}")
        if encoding == "iqp" and n_features not in (None, n_wires):
            raise ValueError(f"{what}: encoding='iqp' encodes one feature per wire: n_features must be "
                             f"{n_wires}, got {n_features}")
        if encoding == "angle" and n_features is not None and n_features > n_wires:
            raise ValueError(f"{what}: angle encoding puts one feature per wire: n_features={n_features} "
                             f"> n_wires={n_wires} (use encoding='reupload' or a classical pre-net)")
        if ansatz != "none" and n_layers == 0 and encoding != "reupload":
            raise ValueError(f"{what}: n_layers must be >= 1 for ansatz {ansatz!r}")
        if encoding == "reupload" and ansatz == "qcnn":
            raise ValueError(f"{what}: ansatz='qcnn' pools the register down to its readout wires, so it "
                             f"cannot follow each re-uploading block: use encoding='angle' or 'iqp'")
        if encoding == "reupload" and n_layers == 0:
            raise ValueError(f"{what}: encoding='reupload' needs n_layers >= 1")
        n_features = n_wires if n_features is None and encoding != "none" else n_features

        circuit = Circuit(n_wires, fuse=fuse, max_fused_wires=max_fused_wires)
        input_map = None
        try:
            if encoding == "angle":
                rotation = enc_kw.pop("rotation", "Y")
                scale = enc_kw.pop("scale", 1.0)
                _no_extra(enc_kw, "encoding_kwargs", "angle")
                wires = list(range(n_wires))
                for start in range(0, n_wires, n_features):
                    T.angle_encoding(circuit, wires=wires[start:start + n_features], rotation=rotation,
                                     scale=scale)
            elif encoding == "iqp":
                # the IQPFeatures map feeds all n_wires features and their products in iqp_encoding's
                # default columns: wires / first_column / product_column would read other columns
                _no_extra({k: v for k, v in enc_kw.items() if k not in ("n_repeats", "pattern")},
                          "encoding_kwargs", "iqp")
                T.iqp_encoding(circuit, **enc_kw)
                input_map = IQPFeatures(n_wires)
            elif encoding == "none":
                _no_extra(enc_kw, "encoding_kwargs", "none")
            if encoding == "reupload":
                axes = enc_kw.pop("encoding", ("Y", "Z"))
                scale = enc_kw.pop("scale", 1.0)
                _no_extra(enc_kw, "encoding_kwargs", "reupload")
                for layer in range(n_layers):
                    _reupload_block(circuit, n_features, axes, scale, what)
                    _ansatz(circuit, ansatz, 1, layer, dict(ans_kw), init, what, single_layer=True,
                            total_layers=n_layers)
            else:
                _ansatz(circuit, ansatz, n_layers, 0, ans_kw, init, what)
        except TypeError as err:
            if "unexpected keyword" in str(err) or "got an unexpected" in str(err):
                raise TypeError(f"{what}: {err}") from None
            raise
        readout = None
        if ansatz == "qcnn":        # the pooled-away wires hold nothing to read
            readout = T.qcnn_readout_wires(n_wires, ans_kw.get("n_readout", 1))
        observables = _measure_observables(measure, n_wires, readout)
        return cls(circuit, observables, diff_method=diff_method, dtype=dtype, shots=shots, seed=seed,
                   input_map=input_map, noise_model=noise_model, simulator=simulator,
                   n_trajectories=n_trajectories, mitigation=mitigation, zne_scale_factors=zne_scale_factors,
                   zne_extrapolation=zne_extrapolation, max_bond=max_bond, cutoff=cutoff)

    # ------------------------------------------------------------------------------------------
    @property
    def n_inputs(self) -> Optional[int]:
        """Number of feature columns ``x`` must have: the circuit's, or the input map's
        ``in_features`` (that of an ``nn.Sequential``'s first module); ``None`` for an input map
        whose input width is unknown (then only its output is checked, against the circuit)."""
        if self.input_map is not None:
            return _in_features(self.input_map)
        return self._circuit_inputs()

    def _circuit_inputs(self) -> int:
        key = len(self.circuit.ops)
        if self._n_inputs_cache is None or self._n_inputs_cache[0] != key:
            self._n_inputs_cache = (key, self.circuit.n_inputs)
        return self._n_inputs_cache[1]

    @property
    def n_outputs(self) -> int:
        return len(self.observables)

    @property
    def n_wires(self) -> int:
        return self.circuit.n_wires

    @property
    def weights(self) -> nn.Parameter:
        return self.circuit.weights

    @property
    def is_noisy(self) -> bool:
        """True where the layer runs on a noisy device model (a ``noise_model``, or a noisy
        MixedCircuit)."""
        return self.noise_model is not None or self.circuit.is_noisy

    @property
    def is_stochastic(self) -> bool:
        """True where every forward pass draws random numbers (shots, or trajectories)."""
        return self.shots is not None or (self.is_noisy and self.simulator == "trajectories")

    def _gen(self, device):
        if not self.is_stochastic or self.seed is None:
            return None
        device = torch.device(device)
        if self._generator is None or self._generator.device.type != device.type:
            self._generator = torch.Generator(device=device)
            self._generator.manual_seed(self.seed)
        return self._generator

    def reset_generator(self) -> None:
        """Restart the shot (and trajectory) sampler from ``seed``."""
        self._generator = None

    def _read_observables(self) -> list:
        """The observables to read: with readout mitigation, those whose value read through the
        readout errors is the pre-readout one (rebuilt when the noise model's readout changes)."""
        if self.mitigation is None or "readout" not in self.mitigation:
            return self.observables
        noise = self.noise_model if self.noise_model is not None else getattr(self.circuit, "noise_model", None)
        readout = getattr(noise, "readout", None)
        if readout is None:
            raise ValueError(f"QuantumLayer: mitigation={self.mitigation!r} but the noise model has no readout "
                             f"errors (any more)")
        if self._mitigated is None or self._mitigated[0] is not readout:
            self._mitigated = (readout, [readout.mitigated_observable(o) for o in self.observables])
        return self._mitigated[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"QuantumLayer: input must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_floating_point():
            raise TypeError(f"QuantumLayer: input must be a real floating tensor, got {x.dtype}")
        if x.dim() not in (1, 2):
            raise ValueError(f"QuantumLayer: input must have shape (B, F) or (F,), got {tuple(x.shape)}")
        need = self.n_inputs
        if need is not None and x.shape[-1] != need:
            reader = "the circuit" if self.input_map is None else "the input_map"
            raise ValueError(f"QuantumLayer: {reader} reads {need} input feature(s) but x has "
                             f"{x.shape[-1]} (shape {tuple(x.shape)})")
        out_dtype = x.dtype
        squeeze = x.dim() == 1
        xb = x.unsqueeze(0) if squeeze else x
        if xb.shape[0] == 0:
            # an empty batch (as nn.Linear takes): no circuit to run, an empty output on the graph
            return xb.new_zeros((0, self.n_outputs)) + 0 * self.circuit.weights.sum().to(out_dtype)
        if self.input_map is not None:
            xb = self.input_map(xb)
            circuit_need = self._circuit_inputs()
            if circuit_need and (not isinstance(xb, torch.Tensor) or xb.dim() != 2
                                 or xb.shape[1] != circuit_need):
                got = tuple(xb.shape) if isinstance(xb, torch.Tensor) else type(xb).__name__
                width = f"{xb.shape[-1]} column(s), " if isinstance(xb, torch.Tensor) and xb.dim() else ""
                raise ValueError(f"QuantumLayer: the input_map must return (B, F) features with F = "
                                 f"{circuit_need}, the circuit's input columns, got {width}shape {got}")
        has_inputs = self._circuit_inputs() > 0
        # under torch.compile the simulation runs outside the graph (see the class docstring)
        compiling = torch.compiler.is_compiling()
        if self.is_noisy:
            run = _noisy_outside_graph if compiling else _noisy_expval
            values = run(self, xb if has_inputs else None, self._gen(xb.device))
        elif self.simulator == "mps":
            run = _mps_outside_graph if compiling else _mps_expval
            values = run(self, xb if has_inputs else None)
        else:
            obs = self.observables[0] if self._single else self.observables
            run = _expval_outside_graph if compiling else circuit_expval
            values = run(self.circuit, obs, x=xb if has_inputs else None, state=None,
                         diff_method=self.diff_method, shots=self.shots, generator=self._gen(xb.device))
        if self._single:
            values = values.unsqueeze(-1)
        if not has_inputs and xb.shape[0] != values.shape[0]:
            values = values.expand(xb.shape[0], -1)
        if squeeze:
            values = values[0]
        return values.to(out_dtype)

    # ------------------------------------------------------------------------------------------
    def __getstate__(self):
        import copy
        state = self.__dict__.copy()
        state["_generator"] = None       # torch.Generator does not pickle; restart from seed
        state["_mitigated"] = None       # rebuilt from the noise model on first use
        # the circuit's cached execution plan holds gate objects with closures, which do not
        # pickle: send a shallow copy of the circuit without it (the plan is rebuilt on first use)
        circuit = state["_modules"].get("circuit")
        if getattr(circuit, "_plan_cache", None) is not None:
            light = copy.copy(circuit)
            light.__dict__["_plan_cache"] = None
            state["_modules"] = {**state["_modules"], "circuit": light}
        return state

    def __deepcopy__(self, memo):
        import copy
        cls = self.__class__
        new = cls.__new__(cls)
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            object.__setattr__(new, k, None if k in ("_generator", "_mitigated") else copy.deepcopy(v, memo))
        return new

    def extra_repr(self) -> str:
        noise = ""
        if self.simulator == "mps":
            noise = f", simulator='mps', max_bond={self.max_bond}, cutoff={self.cutoff:g}"
        if self.is_noisy:
            noise = f", simulator={self.simulator!r}"
            if self.simulator == "trajectories":
                noise += f", n_trajectories={self.n_trajectories}"
            if self.mitigation:
                noise += f", mitigation={self.mitigation!r}"
            if self.noise_model is not None:
                noise += f", noise_model={self.noise_model!r}"
        return (f"n_wires={self.n_wires}, n_inputs={self.n_inputs}, n_outputs={self.n_outputs}, "
                f"diff_method={self.diff_method!r}" + (f", shots={self.shots}" if self.shots else "") + noise)


# ----------------------------------------------------------------------------------------------
# Dynamo must not trace the simulator: TorchInductor has no complex codegen, and tracing the
# Python-level engine costs seconds per circuit, graph-breaks on its input checks and gains nothing
# (measured: same time per step as eager with backend="aot_eager"). This is torch.compiler.disable
# without importing torch._dynamo (seconds) before the first compiled call.
def _outside_graph(fn):
    lazy = getattr(torch, "_disable_dynamo", None)        # torch's own lazy form (torch >= 2.1)
    if lazy is not None:
        return lazy(fn)
    cache = {}

    @functools.wraps(fn)
    def inner(*args, **kwargs):
        if "fn" not in cache:
            cache["fn"] = torch.compiler.disable(fn)
        return cache["fn"](*args, **kwargs)
    return inner


_expval_outside_graph = _outside_graph(circuit_expval)


# ----------------------------------------------------------------------------------------------
# matrix-product states
def _mps_expval(layer: "QuantumLayer", x):
    from . import mps
    obs = layer.observables[0] if layer._single else layer.observables
    return mps.expval(layer.circuit, obs, x, max_bond=layer.max_bond, cutoff=layer.cutoff)


_mps_outside_graph = _outside_graph(_mps_expval)


def _mps_options(circuit, noisy, simulator, shots, diff_method, max_bond, cutoff):
    """``(max_bond, cutoff)`` of a ``simulator="mps"`` layer (None, None otherwise), checked."""
    what = "QuantumLayer"
    if simulator != "mps":
        if max_bond is not None or cutoff is not None:
            raise ValueError(f"{what}: max_bond / cutoff apply only to simulator='mps', got simulator={simulator!r}")
        return None, None
    if noisy:
        raise ValueError(f"{what}: with a noise_model or a noisy MixedCircuit, simulator must be one of "
                         f"('density', 'trajectories'), got 'mps' (the MPS simulator runs pure states only)")
    if shots is not None:
        raise ValueError(f"{what}: simulator='mps' computes exact expectations; shots={shots} is not "
                         f"supported (tql.mps.run(...).sample(shots) draws bit strings)")
    if diff_method not in (None, "auto", "backprop"):
        raise ValueError(f"{what}: simulator='mps' differentiates by backprop only (diff_method None, "
                         f"'auto' or 'backprop'), got diff_method={diff_method!r}")
    from .mps.simulate import _check
    max_bond = 64 if max_bond is None else max_bond
    cutoff = 1e-10 if cutoff is None else cutoff
    _check(circuit, max_bond, cutoff, what)
    return int(max_bond), float(cutoff)


# ----------------------------------------------------------------------------------------------
# noisy layers
def _noisy_expval(layer: "QuantumLayer", x, generator):
    """``(B, n_obs)`` (``(B,)`` for a single observable) values of a noisy layer: on density
    matrices or trajectories, read out, mitigated as the layer says."""
    from . import mixed
    obs = layer._read_observables()
    obs = obs[0] if layer._single else obs
    kwargs = dict(x=x, noise_model=layer.noise_model, diff_method=layer.diff_method, shots=layer.shots,
                  generator=generator)
    if layer.simulator == "trajectories":
        kwargs["n_trajectories"] = layer.n_trajectories
    if layer.mitigation is not None and "zne" in layer.mitigation:
        return mixed.zne_expval(layer.circuit, obs, scale_factors=layer.zne_scale_factors,
                                extrapolation=layer.zne_extrapolation, simulator=layer.simulator, **kwargs)
    run = mixed.expval if layer.simulator == "density" else mixed.trajectories.expval
    return run(layer.circuit, obs, **kwargs)


_noisy_outside_graph = _outside_graph(_noisy_expval)


def _check_noise_model(noise_model):
    if noise_model is None:
        return None
    from .mixed import NoiseModel
    if not isinstance(noise_model, NoiseModel):
        hint = (" (a noise spec written as plain data becomes one with "
                "lightning_tasks.noise_spec.noise_model_from_spec)") if isinstance(noise_model, dict) else ""
        raise TypeError(f"QuantumLayer: noise_model must be a tql.NoiseModel or None, got "
                        f"{type(noise_model).__name__}{hint}")
    return noise_model


def _folds_into_gates(circuit, noise_model) -> bool:
    """Whether every channel of the run is a mixture of unitaries, so that each trajectory is a
    unitary circuit (mixed.trajectories folds the sampled branches into U3 gates)."""
    from .mixed import trajectories
    from .mixed.simulate import _resolve_noise
    return trajectories._folded(circuit, _resolve_noise(circuit, noise_model)) is not None


def _noise_options(circuit, noisy, noise_model, simulator, n_trajectories, mitigation, scale_factors,
                   extrapolation, diff_method):
    """(simulator, n_trajectories, mitigation, zne_scale_factors, zne_extrapolation), checked."""
    what = "QuantumLayer"
    if not isinstance(simulator, str) or simulator not in SIMULATORS:
        raise ValueError(f"{what}: simulator must be one of {SIMULATORS}, got {simulator!r}")
    if mitigation is not None and (not isinstance(mitigation, str) or mitigation not in MITIGATIONS):
        raise ValueError(f"{what}: mitigation must be None or one of {MITIGATIONS}, got {mitigation!r}")
    if not noisy:
        given = [name for name, on in (("simulator='trajectories'", simulator == "trajectories"),
                                       ("n_trajectories", n_trajectories is not None),
                                       ("mitigation", mitigation is not None),
                                       ("zne_scale_factors", scale_factors is not None),
                                       ("zne_extrapolation", extrapolation is not None)) if on]
        if given:
            raise ValueError(f"{what}: {', '.join(given)} apply only to a noisy layer (give a noise_model): a pure "
                             f"state has nothing to sample or mitigate")
        return simulator, None, None, None, None
    n = circuit.n_wires
    if simulator == "density":
        if n_trajectories is not None:
            raise ValueError(f"{what}: n_trajectories={n_trajectories!r} applies to simulator='trajectories' only")
        if n > MAX_DENSITY_WIRES:
            per_sample = 4 ** n * torch.empty((), dtype=circuit.dtype).element_size()
            raise ValueError(f"{what}: simulator='density' holds 4**n amplitudes per sample: {n} wires need "
                             f"{per_sample / 2 ** 30:.1f} GiB per sample (at most {MAX_DENSITY_WIRES} wires); "
                             f"use simulator='trajectories' (2**n amplitudes per trajectory)")
        if diff_method == "adjoint":
            raise ValueError(f"{what}: diff_method='adjoint' cannot differentiate density matrices (channels are "
                             f"not invertible, so the state cannot be un-computed); use 'backprop' (or 'auto'), "
                             f"'parameter-shift', or simulator='trajectories' with mixed-unitary noise")
    else:
        n_trajectories = 64 if n_trajectories is None else _check_int(n_trajectories, "n_trajectories", what)
        if diff_method in ("adjoint", "parameter-shift") and not _folds_into_gates(circuit, noise_model):
            raise ValueError(f"{what}: diff_method={diff_method!r} on trajectories needs every channel to be a "
                             f"mixture of unitaries (depolarizing, Pauli channels); this noise has channels, "
                             f"measurements or resets whose sampled branches are not unitary: use 'backprop'")
    effective = noise_model if noise_model is not None else getattr(circuit, "noise_model", None)
    if mitigation is not None and "readout" in mitigation and getattr(effective, "readout", None) is None:
        raise ValueError(f"{what}: mitigation={mitigation!r} needs readout errors in the noise model "
                         f"(NoiseModel.add_readout_error)")
    zne = mitigation is not None and "zne" in mitigation
    if not zne:
        if scale_factors is not None or extrapolation is not None:
            raise ValueError(f"{what}: zne_scale_factors / zne_extrapolation apply only with mitigation='zne' or "
                             f"'zne+readout', got mitigation={mitigation!r}")
        return simulator, n_trajectories, mitigation, None, None
    from .mixed.zne import _check_scales
    if effective is None or not effective.rules:
        raise ValueError(f"{what}: mitigation={mitigation!r} amplifies the gate noise of the noise model by "
                         f"folding, but it has no channel rules (NoiseModel.add)")
    scale_factors = tuple(_check_scales((1, 3, 5) if scale_factors is None else scale_factors,
                                        f"{what}: zne_scale_factors"))
    extrapolation = "richardson" if extrapolation is None else extrapolation
    if extrapolation not in _ZNE_EXTRAPOLATIONS:
        raise ValueError(f"{what}: zne_extrapolation must be one of {_ZNE_EXTRAPOLATIONS}, got {extrapolation!r}")
    return simulator, n_trajectories, mitigation, scale_factors, extrapolation


def _in_features(module) -> Optional[int]:
    """Input width of an input map: its ``in_features``, or that of an ``nn.Sequential``'s first
    module; None when unknown."""
    while isinstance(module, nn.Sequential) and len(module) > 0:
        module = module[0]
    n = getattr(module, "in_features", None)
    return int(n) if isinstance(n, int) and not isinstance(n, bool) else None


def _no_extra(kw, name, encoding):
    if kw:
        raise TypeError(f"QuantumLayer.from_template: unexpected {name} {sorted(kw)} for encoding {encoding!r}")


def _reupload_block(circuit, n_features, axes, scale, what):
    if isinstance(axes, str):
        axes = (axes,)
    axes = tuple(axes)
    if not axes:
        raise ValueError(f"{what}: encoding_kwargs['encoding'] must name at least one rotation axis")
    n = circuit.n_wires
    for i in range(n_features):
        T.angle_encoding(circuit, wires=[i % n], rotation=axes[(i // n) % len(axes)], first_column=i,
                         scale=scale)


def _ansatz(circuit, name, n_layers, layer, kw, init, what, single_layer=False, total_layers=1):
    """Append ``n_layers`` layers of ansatz ``name`` (with ``single_layer``: layer number ``layer`` of
    ``total_layers``)."""
    n = circuit.n_wires
    if name == "none":
        if kw:
            raise TypeError(f"{what}: ansatz 'none' takes no ansatz_kwargs, got {sorted(kw)}")
        return
    if name == "rxryrz_ring":
        if kw:
            raise TypeError(f"{what}: ansatz 'rxryrz_ring' takes no ansatz_kwargs, got {sorted(kw)} "
                            f"(use ansatz='hardware_efficient' with rotations/pattern)")
        name = "hardware_efficient"
        kw = dict(rotations=("RX", "RY", "RZ"), pattern="ring", kind="complex", final_rotations=False)
    if name == "hardware_efficient":
        if single_layer:
            # an explicit final_rotations=True puts the closing rotation layer after the last block
            kw["final_rotations"] = bool(kw.get("final_rotations", False)) and layer == total_layers - 1
        if "rotations" in kw and "kind" not in kw:
            kw["kind"] = "complex"      # the 'real' check is opt-in: any rotation set works
        T.hardware_efficient(circuit, n_layers, init=init, **kw)
    elif name == "strongly_entangling":
        if single_layer and n > 1:
            if "ranges" not in kw:
                kw["ranges"] = [layer % (n - 1) + 1]
            else:       # the user's ranges are one per layer of the whole model
                ranges = list(kw["ranges"])
                if len(ranges) != total_layers:
                    raise ValueError(f"{what}: ansatz_kwargs['ranges'] has {len(ranges)} entries for "
                                     f"{total_layers} layers")
                kw["ranges"] = [ranges[layer]]
        T.strongly_entangling(circuit, n_layers, init=init, **kw)
    elif name == "basic_entangler":
        T.basic_entangler(circuit, n_layers, init=init, **kw)
    elif name == "qcnn":
        if "n_conv" in kw:
            raise TypeError(f"{what}: ansatz_kwargs['n_conv'] clashes with n_layers, which is the number of "
                            f"convolution layers per QCNN level: give n_layers")
        T.qcnn(circuit, n_conv=n_layers, init=init, **kw)
