import torch, numpy as np, itertools, time
import torchquantum_layers as tql
import torchquantum_layers.chem as chem
from torchquantum_layers.observables import Hamiltonian
def run(opt_factory, steps, layers, seed):
    rng = np.random.default_rng(seed)
    terms = [(float(rng.normal()), a+"0 "+b+"1") for a,b in itertools.product("IXYZ", repeat=2)]
    H = Hamiltonian([(c, p.replace("I0","").replace("I1","").strip()) for c,p in terms], n_wires=2)
    exact = np.linalg.eigvalsh(H.to_dense().numpy())
    torch.manual_seed(seed)
    c = tql.templates.strongly_entangling(tql.Circuit(2, dtype=torch.float64), n_layers=layers)
    t=time.time()
    r = chem.ssvqe(H, c, k=4, steps=steps, optimizer=opt_factory, tol=0)
    return np.abs(r.energies.numpy()-exact).max(), time.time()-t
for name, f, steps in [("lbfgs20", lambda p: torch.optim.LBFGS(p, lr=1, max_iter=20, line_search_fn="strong_wolfe", tolerance_change=1e-14, tolerance_grad=1e-10), 15),
                       ("adam", lambda p: torch.optim.Adam(p, lr=0.05), 600)]:
    for layers in [3,4]:
        out=[run(f, steps, layers, s) for s in range(8)]
        print(name, layers, [f"{e:.1e}" for e,_ in out], round(sum(t for _,t in out),1))
