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
print("max_iter=1 variants")
for tc in [1e-9]:
    f = lambda p: torch.optim.LBFGS(p, lr=1, max_iter=1, max_eval=25, line_search_fn="strong_wolfe", tolerance_change=tc, tolerance_grad=1e-10, history_size=50)
    out=[run(f, 300, 3, s) for s in range(8)]
    print(tc, [f"{e:.1e}" for e,_ in out], round(sum(t for _,t in out),1))
