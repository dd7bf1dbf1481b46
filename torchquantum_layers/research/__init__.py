"""Research models after Paddle Quantum's tutorials, each a function returning its numbers:

* :func:`prepare_gibbs_state` — variational Gibbs state (free energy with a Taylor entropy);
* :func:`vqsd` — variational quantum state diagonalization;
* :func:`vqsvd` — variational quantum singular value decomposition;
* :func:`quantum_autoencoder` — compress a mixed state into fewer qubits;
* :func:`train_qgan` / :class:`QGAN` — a quantum GAN learning a pure state;
* :func:`vqls` — variational quantum linear solver (local / global cost; :func:`vqls_cost` for a
  fixed state; :func:`pauli_decompose` of a dense matrix);
* :func:`gradient_variance` — the barren-plateau study (:func:`plot_gradient_variance` with the
  ``plot`` extra);
* :func:`expressibility`, :func:`entangling_capability`, :func:`parameter_dimension` — ansatz
  descriptors (Sim et al. 2019; Haug et al. 2021), :func:`meyer_wallach` of given states;
* :func:`neural_tangent_kernel`, :func:`parameter_jacobian` — the empirical (quantum) neural
  tangent kernel of any model, by torch.func.
"""
from .ansatz_metrics import (EntanglingResult, ExpressibilityResult, ParameterDimensionResult, entangling_capability,
                             expressibility, haar_fidelity_bins, kl_to_haar, meyer_wallach, parameter_dimension,
                             sample_fidelities)
from .autoencoder import AutoencoderResult, autoencode, quantum_autoencoder
from .barren import BarrenResult, gradient_samples, gradient_variance, plot_gradient_variance, random_layer_circuit
from .gibbs import GibbsResult, free_energy_loss, gibbs_state, prepare_gibbs_state
from .qgan import QGAN, QGANResult, default_target, train_qgan
from .vqsd import VQSDResult, spectrum_state, vqsd
from .vqsvd import VQSVDResult, paddle_random_matrix, vqsvd
from .linear_solver import VQLSResult, ising_linear_system, pauli_decompose, vqls, vqls_cost
from .tangent_kernel import neural_tangent_kernel, parameter_jacobian

__all__ = ["prepare_gibbs_state", "gibbs_state", "free_energy_loss", "GibbsResult", "vqsd", "spectrum_state",
           "VQSDResult", "vqsvd", "paddle_random_matrix", "VQSVDResult", "quantum_autoencoder", "autoencode",
           "AutoencoderResult", "QGAN", "train_qgan", "default_target", "QGANResult", "gradient_variance",
           "gradient_samples", "plot_gradient_variance", "random_layer_circuit", "BarrenResult", "vqls", "vqls_cost",
           "VQLSResult", "pauli_decompose", "ising_linear_system", "expressibility", "entangling_capability",
           "meyer_wallach", "parameter_dimension", "haar_fidelity_bins", "kl_to_haar", "sample_fidelities",
           "ExpressibilityResult", "EntanglingResult", "ParameterDimensionResult", "neural_tangent_kernel",
           "parameter_jacobian"]
