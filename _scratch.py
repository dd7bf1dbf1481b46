import torch, numpy as np, itertools, time
import torchquantum_layers as tql
import torchquantum_layers.chem as chem
from torchquantum_layers.observables import Hamiltonian
seed=0
rng = np.random.default_rng(seed)
terms = [(float(rng.normal()), a+"0 "+b+"1") for a,b in itertools.product("IXYZ", repeat=2)]
H = Hamiltonian([(c, p.replace("I0","").replace("I1","").strip()) for c,p in terms], n_wires=2)
exact = np.linalg.eigvalsh(H.to_dense().numpy())
torch.manual_seed(seed)
c = tql.templates.strongly_entangling(tql.Circuit(2, dtype=torch.float64), n_layers=3)
r = chem.ssvqe(H, c, k=4, steps=10, tol=0, callback=lambda s,v,e: print(s, v, e.detach().numpy(), c.weights.grad.abs().max().item()))
print(exact, (np.arange(4,0,-1)*exact).sum())
