"""ToRA, tensorized low-rank adaptation (MTSAM, ICLR 2025): one Tucker-factored update tensor per adapted
layer, shared by T tasks, beside the frozen weight.

For an adapted linear y = x W0^T + b (W0: [d_out, d_in]) and T tasks the update is a 3-way tensor

    dW = G x1 U1 x2 U2 x3 U3,   dW[i, j, t] = sum_{p,q,v} G[p, q, v] U1[i, p] U2[j, q] U3[t, v]

with the core G: [R1, R2, R3] (initialised to 0, so the adapted model starts *exactly* at the frozen one),
U1: [d_in, R1], U2: [d_out, R2] and U3: [T, R3] drawn from N(0, 1). U1, U2 and G are shared by the tasks;
row t of U3 is task t's own. ``ToraSpec.init="orthonormal"`` (not the official code's) replaces the N(0, 1)
draws of U1 and U2 by the orthonormal factor Q of their QR decomposition (signs fixed by diag R > 0): the
point the orthogonality regulariser drives them to, so that a short run's update ``dW_t`` is not inflated by
column norms of about sqrt(d_in) and sqrt(d_out) (``||U1|| ||U2||`` is about 600 at d = 384 with N(0, 1)).
Task t's forward is

    y = x W0^T + b + dropout(x) (s dW_t)^T,    dW_t = dW[:, :, t]^T: [d_out, d_in],  s = ``scaling``,

computed without forming dW_t: with G_t = sum_v G[:, :, v] U3[t, v] ([R1, R2]),
dW_t = U2 G_t^T U1^T, so dropout(x) (s dW_t)^T = s ((dropout(x) U1) G_t) U2^T. That also writes each task's
update as a LoRA pair, B_t = s U2 G_t^T ([d_out, R1]) and A = U1^T ([R1, d_in]), which is how
:func:`tora_factors` hands ToRA updates to the KnOTS merge (:mod:`components.merging.knots`).

The official code adapts SAM's fused ``qkv`` linear (``QKVLinear``): one tensor whose U2 spans the q, k and
v outputs (d_out = 3d). With ``fuse=True`` the target linears that share a parent module (``q_proj``,
``k_proj``, ``v_proj`` of one attention) share one tensor in the same way: its U2 has the rows of all of
them stacked in the order of ``targets``, and each linear reads its own rows (each projection draws its
own dropout mask; the fused linear draws one).

The task is chosen by :func:`use_task` (a context manager over every ToRA tensor of a model): ``t`` in
[0, T), or ``-1`` for the official multi-task forward, where the batch holds every sample T times,
task-major ([T * B, ...]: rows [t B, (t + 1) B) go through task t's update).

The orthogonality regulariser (:func:`orthogonality_loss`) is the mean, over every adapted tensor, of
||U1^T U1 - I||_F, ||U2^T U2 - I||_F and ||G[:, :, r]^T G[:, :, r] - I||_F for every r.

Trainable parameters per tensor: d_in R1 + d_out R2 + R1 R2 R3 + T R3 (:func:`tora_parameter_count`).
The interface mirrors :mod:`components.models.lora`: :func:`attach_tora` wraps a copy of a model,
:func:`tora_deltas` / :func:`tora_factors` read the per-task updates keyed by the *base model's* layer
names, :func:`merged_model` applies one task's update to the plain weights (``apply_deltas``), and
:func:`save_tora` / :func:`load_tora` store the factors as safetensors.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from components.io import load_tensors, save_tensors
from components.models.lora import LoraFactors, apply_deltas

MULTI_TASK = -1  # use_task(model, MULTI_TASK): the batch is every sample T times, task-major
TORA_INITS = ("normal", "orthonormal")


@dataclass(frozen=True)
class ToraSpec:
    """ToRA hyperparameters. Defaults: the official ``run.sh`` (R1 = R2 = 32, R3 = 4, scaling 0.5, dropout
    0.1) on the q/k/v projections, fused as the official qkv linear, for NYUv2's three tasks."""

    ranks: tuple[int, int, int] = (32, 32, 4)
    n_tasks: int = 3
    scaling: float = 0.5
    dropout: float = 0.1
    targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj")
    fuse: bool = True
    init: str = "normal"  # "normal": U1, U2 ~ N(0, 1) (official); "orthonormal": Q of their QR decomposition

    def __post_init__(self) -> None:
        if self.init not in TORA_INITS:
            raise ValueError(f"ToraSpec.init must be one of {TORA_INITS}, got {self.init!r}")
        if len(self.ranks) != 3 or any(not isinstance(r, int) or r < 1 for r in self.ranks):
            raise ValueError(f"ToraSpec.ranks must be three ints >= 1 (R1, R2, R3), got {self.ranks!r}")
        if self.n_tasks < 1:
            raise ValueError(f"ToraSpec.n_tasks must be >= 1, got {self.n_tasks}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"ToraSpec.dropout must be in [0, 1), got {self.dropout}")
        if not self.targets:
            raise ValueError("ToraSpec.targets names no linear")


def tora_parameter_count(d_in: int, d_out: int, ranks: Sequence[int], n_tasks: int) -> int:
    """Trainable numbers of one ToRA tensor: d_in R1 + d_out R2 + R1 R2 R3 + T R3."""
    r1, r2, r3 = ranks
    return d_in * r1 + d_out * r2 + r1 * r2 * r3 + n_tasks * r3


def orthonormal_columns(m: Tensor) -> Tensor:
    """The Q factor of ``m`` [n, r] (n >= r) with the signs that make diag R positive: orthonormal columns
    spanning the same space, a deterministic function of ``m``."""
    if m.shape[0] < m.shape[1]:
        raise ValueError(f"orthonormal columns need at least as many rows as columns, got shape {tuple(m.shape)}")
    q, r = torch.linalg.qr(m)
    signs = torch.sign(torch.diagonal(r))
    return q * torch.where(signs == 0, torch.ones_like(signs), signs)


class ToraTensor(nn.Module):
    """The Tucker factors of one adapted (possibly fused) linear: G [R1, R2, R3] = 0, U1 [d_in, R1],
    U2 [d_out, R2], U3 [T, R3] ~ N(0, 1) (drawn from ``generator``)."""

    def __init__(self, d_in: int, d_out: int, spec: ToraSpec, generator: torch.Generator) -> None:
        super().__init__()
        r1, r2, r3 = spec.ranks
        self.n_tasks, self.scaling = spec.n_tasks, spec.scaling
        self.G = nn.Parameter(torch.zeros(r1, r2, r3))
        u1, u2 = torch.randn(d_in, r1, generator=generator), torch.randn(d_out, r2, generator=generator)
        if spec.init == "orthonormal":
            u1, u2 = orthonormal_columns(u1), orthonormal_columns(u2)
        self.U1 = nn.Parameter(u1)
        self.U2 = nn.Parameter(u2)
        self.U3 = nn.Parameter(torch.randn(spec.n_tasks, r3, generator=generator))
        self.dropout = nn.Dropout(spec.dropout)
        self.task: int | None = None

    def task_cores(self) -> Tensor:
        """G_t = G x3 U3[t] for every task: [T, R1, R2]."""
        return torch.einsum("pqv,tv->tpq", self.G, self.U3)

    def delta(self, task: int, rows: slice = slice(None)) -> Tensor:
        """s dW_t restricted to the output ``rows``: [d_out_rows, d_in] (= s U2 G_t^T U1^T)."""
        core = self.task_cores()[task]
        return self.scaling * self.U2[rows] @ core.T @ self.U1.T

    def update(self, x: Tensor, rows: slice) -> Tensor:
        """dropout(x) (s dW_t[rows])^T for the current task (or every task, task-major, for MULTI_TASK)."""
        if self.task is None:
            raise RuntimeError("no ToRA task is set: wrap the forward pass in use_task(model, task)")
        low = self.dropout(x) @ self.U1  # [..., R1]
        u2 = self.U2[rows]
        if self.task != MULTI_TASK:
            core = torch.einsum("pqv,v->pq", self.G, self.U3[self.task])
            return self.scaling * (low @ core) @ u2.T
        if x.shape[0] % self.n_tasks:
            raise ValueError(
                f"multi-task ToRA forward needs a batch of T * B rows (T = {self.n_tasks}), got {x.shape[0]}"
            )
        per_task = low.reshape(self.n_tasks, -1, low.shape[-1])  # task-major: [T, B * ..., R1]
        mixed = torch.bmm(per_task, self.task_cores()) @ u2.T  # [T, B * ..., d_out_rows]
        return self.scaling * mixed.reshape(*x.shape[:-1], u2.shape[0])

    def orthogonality_terms(self) -> list[Tensor]:
        """||U1^T U1 - I||_F, ||U2^T U2 - I||_F and ||G_r^T G_r - I||_F for every slice r of the core."""

        def off_identity(m: Tensor) -> Tensor:
            return torch.linalg.matrix_norm(m.T @ m - torch.eye(m.shape[1], dtype=m.dtype, device=m.device))

        return [
            off_identity(self.U1),
            off_identity(self.U2),
            *(off_identity(self.G[:, :, r]) for r in range(self.G.shape[2])),
        ]


class ToraLinear(nn.Module):
    """A frozen ``base`` linear plus its rows of a (shared) :class:`ToraTensor`."""

    def __init__(self, base: nn.Linear, tensor: ToraTensor, rows: slice) -> None:
        super().__init__()
        self.base = base
        self.rows = rows
        object.__setattr__(self, "_tensor", tensor)  # registered once, on the parent; a reference here

    @property
    def tensor(self) -> ToraTensor:
        return self._tensor

    def forward(self, x: Tensor) -> Tensor:
        return self.base(x) + self.tensor.update(x, self.rows)


def _targets(model: nn.Module, targets: Sequence[str]) -> list[tuple[str, nn.Linear]]:
    """(name, linear) of every nn.Linear whose name is a target or ends with '.' + a target, in module order."""
    found = [
        (name, m)
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and any(name == t or name.endswith("." + t) for t in targets)
    ]
    if not found:
        raise ValueError(f"no nn.Linear named {list(targets)} in {type(model).__name__}")
    return found


def _parent(model: nn.Module, name: str) -> tuple[nn.Module, str, str]:
    parent_name, _, child = name.rpartition(".")
    return (model.get_submodule(parent_name) if parent_name else model), parent_name, child


def attach_tora(model: nn.Module, spec: ToraSpec, seed: int = 0) -> nn.Module:
    """Wrap a *copy* of ``model``: every target linear becomes a :class:`ToraLinear` (``model`` is untouched).

    Every parameter of the copy is frozen except the ToRA factors (``tora_parameters``); the caller may
    unfreeze others (norms, heads). With ``spec.fuse`` the targets under one parent module share one tensor,
    registered on that parent as ``tora`` (e.g. ``blocks.0.attn.tora.G``); otherwise each linear has its own,
    registered as ``<linear name>_tora``. U1, U2, U3 are drawn from ``torch.Generator().manual_seed(seed)``
    in module order, so the same seed gives the same factors.
    """
    wrapped = copy.deepcopy(model)
    wrapped.requires_grad_(False)
    generator = torch.Generator().manual_seed(seed)
    groups: dict[str, list[tuple[str, nn.Linear]]] = {}
    for name, linear in _targets(wrapped, spec.targets):
        key = _parent(wrapped, name)[1] if spec.fuse else name
        groups.setdefault(key, []).append((name, linear))
    for key, members in groups.items():
        d_in = members[0][1].in_features
        if any(lin.in_features != d_in for _, lin in members):
            raise ValueError(
                f"fused ToRA targets under {key!r} differ in input width: "
                f"{[(n, lin.in_features) for n, lin in members]}"
            )
        tensor = ToraTensor(d_in, sum(lin.out_features for _, lin in members), spec, generator)
        parent, _, child = _parent(wrapped, members[0][0])
        parent.add_module("tora" if spec.fuse else f"{child}_tora", tensor)
        start = 0
        for name, linear in members:
            rows = slice(start, start + linear.out_features)
            start = rows.stop
            owner, _, child = _parent(wrapped, name)
            setattr(owner, child, ToraLinear(linear, tensor, rows))
    return wrapped


def tora_tensors(model: nn.Module) -> list[ToraTensor]:
    return [m for m in model.modules() if isinstance(m, ToraTensor)]


def tora_linears(model: nn.Module) -> dict[str, ToraLinear]:
    """{base-model layer name: ToraLinear} (the name the wrapped linear had before ``attach_tora``)."""
    return {name: m for name, m in model.named_modules() if isinstance(m, ToraLinear)}


def tora_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Every G, U1, U2, U3 of the model (each once)."""
    return [p for tensor in tora_tensors(model) for p in tensor.parameters()]


@contextlib.contextmanager
def use_task(model: nn.Module, task: int) -> Iterator[nn.Module]:
    """Run ``model``'s ToRA layers as task ``task`` (or MULTI_TASK) inside the block; restores the previous."""
    tensors = tora_tensors(model)
    if not tensors:
        raise ValueError(f"{type(model).__name__} has no ToRA layers")
    n_tasks = tensors[0].n_tasks
    if task != MULTI_TASK and not 0 <= task < n_tasks:
        raise ValueError(f"task must be in [0, {n_tasks}) or {MULTI_TASK} (multi-task), got {task}")
    previous = [t.task for t in tensors]
    for t in tensors:
        t.task = task
    try:
        yield model
    finally:
        for t, before in zip(tensors, previous):
            t.task = before


def orthogonality_loss(model: nn.Module) -> Tensor:
    """R_orth: the mean of every ToRA tensor's orthogonality terms (see the module docstring)."""
    terms = [term for tensor in tora_tensors(model) for term in tensor.orthogonality_terms()]
    if not terms:
        raise ValueError(f"{type(model).__name__} has no ToRA layers")
    return torch.stack(terms).mean()


def tora_deltas(model: nn.Module, task: int) -> dict[str, Tensor]:
    """{base-model layer name: s dW_t [d_out, d_in]} of task ``task`` (detached copies)."""
    with torch.no_grad():
        return {name: lin.tensor.delta(task, lin.rows).detach().clone() for name, lin in tora_linears(model).items()}


def tora_factors(model: nn.Module) -> list[dict[str, LoraFactors]]:
    """Per task, {base-model layer name: LoraFactors(B_t = s U2 G_t^T, A = U1^T, scale 1)}: each task's update
    as a LoRA pair of rank R1, the input of ``group_factors_by_layer`` and the KnOTS merge."""
    out: list[dict[str, LoraFactors]] = []
    with torch.no_grad():
        layers = tora_linears(model)
        n_tasks = next(iter(layers.values())).tensor.n_tasks
        for task in range(n_tasks):
            factors = {}
            for name, lin in layers.items():
                tensor = lin.tensor
                core = tensor.task_cores()[task]
                factors[name] = LoraFactors(
                    B=(tensor.scaling * tensor.U2[lin.rows] @ core.T).clone(), A=tensor.U1.T.clone(), scale=1.0
                )
            out.append(factors)
    return out


def unwrap_tora(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with every ToraLinear replaced by its frozen base linear and the tensors removed."""
    plain = copy.deepcopy(model)
    for name in list(tora_linears(plain)):
        owner, _, child = _parent(plain, name)
        setattr(owner, child, getattr(owner, child).base)
    for module in list(plain.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, ToraTensor):
                delattr(module, child_name)
    return plain


def merged_model(model: nn.Module, task: int) -> nn.Module:
    """The plain model with W = W0 + s dW_t in every adapted linear (what task ``task`` computes, without
    dropout): ``apply_deltas(unwrap_tora(model), tora_deltas(model, task))``."""
    return apply_deltas(unwrap_tora(model), tora_deltas(model, task))


def _named_factors(model: nn.Module) -> dict[str, nn.Parameter]:
    """{``<tensor module name>.G|U1|U2|U3``: parameter} of every ToRA tensor of ``model``."""
    return {
        f"{name}.{pname}": p
        for name, module in model.named_modules()
        if isinstance(module, ToraTensor)
        for pname, p in module.named_parameters()
    }


def save_tora(model: nn.Module, path: str | os.PathLike[str]) -> None:
    """Write only the ToRA factors (``<tensor module name>.G/U1/U2/U3``) as safetensors."""
    save_tensors(
        {name: p.detach() for name, p in _named_factors(model).items()},
        path,
        metadata={"format": "paperflows-tora-factors"},
    )


def load_tora(model: nn.Module, path: str | os.PathLike[str]) -> nn.Module:
    """Load what ``save_tora`` wrote into a model built by ``attach_tora`` with the same spec (in place).
    Fails naming the file and the first unknown, missing or mis-shaped factor."""
    tensors, params = load_tensors(path), _named_factors(model)
    unknown, missing = sorted(set(tensors) - set(params)), sorted(set(params) - set(tensors))
    if unknown or missing:
        raise ValueError(f"{path}: ToRA factors do not match the model: unknown {unknown[:4]}, missing {missing[:4]}")
    with torch.no_grad():
        for name, value in tensors.items():
            if params[name].shape != value.shape:
                raise ValueError(
                    f"{path}: {name} has shape {tuple(value.shape)}, the model's is {tuple(params[name].shape)}"
                )
            params[name].copy_(value)
    return model


__all__ = [
    "MULTI_TASK",
    "TORA_INITS",
    "ToraLinear",
    "ToraSpec",
    "ToraTensor",
    "attach_tora",
    "load_tora",
    "merged_model",
    "orthonormal_columns",
    "orthogonality_loss",
    "save_tora",
    "tora_deltas",
    "tora_factors",
    "tora_linears",
    "tora_parameter_count",
    "tora_parameters",
    "tora_tensors",
    "unwrap_tora",
    "use_task",
]
