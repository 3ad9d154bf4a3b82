# SPDX-License-Identifier: GPL-2.0
"""torch_rbln.compile: a function (or module) as one graph on the card.

``compile(fn)`` traces ``fn`` with ``torch.fx`` once, checks that every
operator in it lowers to the card (below), and returns a callable that
runs ``fn`` as a librbln graph: the first call with a new *input profile*
(per tensor argument its dtype, shape, strides, storage offset and device;
the Python scalar arguments) captures the operators and uploads their
Definition ("recompile"); a call with a known profile replays it as one
job.  explain() counts replays and recompiles and shows the upload
counters (``graph_upload defs= bytes= copies= spilled=``).

A function with an operator that does not lower runs on the CPU instead
(its tensor arguments copied there, its results back), with a warning --
or, with ``TORCH_RBLN_DISABLE_FALLBACK=compile_error`` (a comma list with
``unsupported_op`` too), raises ``RuntimeError`` naming the operator.

Operators that lower: ``+``, ``*``, ``@`` and ``torch.add``, ``torch.mul``,
``torch.matmul``, ``torch.mm``, ``torch.relu``, ``F.relu``, ``F.linear``,
``torch.addmm``; the tensor methods of the same names, ``t``,
``contiguous``, ``float``, ``half``, ``bfloat16``; ``nn.Linear`` and
``nn.ReLU`` submodules.  Tensor arguments must be on one rbln device and
use float32, float16 or bfloat16.

``dynamic`` is accepted for ``torch.compile``'s signature; shapes are
always specialised (a new shape is a new profile).
"""

import operator
import os
import warnings

import torch
import torch.fx

from . import _C

_FUNCTIONS = {
    operator.add, operator.mul, operator.matmul,
    torch.add, torch.mul, torch.matmul, torch.mm, torch.relu, torch.addmm,
    torch.nn.functional.relu, torch.nn.functional.linear,
}
_METHODS = {
    "add", "mul", "matmul", "mm", "relu", "t", "contiguous", "float",
    "half", "bfloat16",
}
_MODULES = (torch.nn.Linear, torch.nn.ReLU)


def _fallback_disabled():
    value = os.environ.get("TORCH_RBLN_DISABLE_FALLBACK", "")
    return "compile_error" in [v.strip() for v in value.split(",")]


def _unsupported(gm):
    """The operators of ``gm`` that do not lower, as names."""
    bad = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target not in _FUNCTIONS:
            bad.append(getattr(node.target, "__name__", str(node.target)))
        elif node.op == "call_method" and node.target not in _METHODS:
            bad.append("Tensor." + node.target)
        elif node.op == "call_module":
            mod = gm.get_submodule(node.target)
            if not isinstance(mod, _MODULES):
                bad.append(type(mod).__name__)
    return bad


class CompiledFunction:
    """What ``compile(fn)`` returns; call it like ``fn``."""

    def __init__(self, fn):
        self._fn = fn
        self._why_cpu = None
        try:
            self._gm = torch.fx.symbolic_trace(fn)
        except Exception as e:  # noqa: BLE001 - any trace failure means no graph
            self._gm = None
            self._why_cpu = "torch.fx cannot trace it (%s)" % e
        else:
            self._sequence = _returns_sequence(self._gm)
            bad = _unsupported(self._gm)
            if bad:
                self._why_cpu = ("operators that do not lower to the card: "
                                 + ", ".join(sorted(set(bad))))
        if self._why_cpu is not None and _fallback_disabled():
            raise RuntimeError(
                "torch_rbln.compile(%s): %s; TORCH_RBLN_DISABLE_FALLBACK="
                "compile_error forbids running it on the CPU instead"
                % (getattr(fn, "__name__", type(fn).__name__), self._why_cpu))
        self._graphs = {}  # argument kinds -> _C.GraphFunction
        self._warned = False

    def _cpu(self, args):
        if not self._warned:
            warnings.warn("torch_rbln.compile(%s): %s; it runs on the CPU "
                          "(tensors copied there and back)"
                          % (getattr(self._fn, "__name__",
                                     type(self._fn).__name__),
                             self._why_cpu), RuntimeWarning, stacklevel=3)
            self._warned = True
        device = next((a.device for a in args
                       if isinstance(a, torch.Tensor)), None)
        out = self._fn(*[a.cpu() if isinstance(a, torch.Tensor) else a
                         for a in args])
        if isinstance(out, (tuple, list)):
            return type(out)(o.to(device) for o in out)
        return out.to(device)

    def __call__(self, *args):
        if self._why_cpu is not None:
            return self._cpu(args)
        kinds = []
        tensors, scalars = [], []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                kinds.append("t")
                tensors.append(a)
            elif isinstance(a, (bool, int, float)):
                kinds.append("s")
                scalars.append(float(a))
            else:
                raise TypeError("torch_rbln.compile: argument %d is a %s; "
                                "pass tensors and Python numbers"
                                % (i, type(a).__name__))
        kinds = "".join(kinds)
        graph = self._graphs.get(kinds)
        if graph is None:
            graph = self._graphs[kinds] = _C.GraphFunction(
                _body(self._gm, kinds, self._sequence))
        outs = graph(tensors, scalars)
        return tuple(outs) if self._sequence else outs[0]

    def stats(self):
        """calls, replays, recompiles and profiles, over every call."""
        total = {"calls": 0, "replays": 0, "recompiles": 0, "profiles": 0}
        for g in self._graphs.values():
            for k, v in g.stats().items():
                total[k] += v
        return total


def _body(gm, kinds, sequence):
    """The graph's body for arguments of ``kinds`` ("t" tensor, "s" scalar,
    in order): runs the traced function on them.  It must not refer to the
    CompiledFunction: the C++ GraphFunction holds it, out of the garbage
    collector's sight, and a cycle through it would never be freed."""
    def body(ts, ss):
        ts, ss = list(ts), list(ss)
        full = [ts.pop(0) if k == "t" else ss.pop(0) for k in kinds]
        out = gm(*full)
        return list(out) if sequence else [out]
    return body


def _returns_sequence(gm):
    for node in gm.graph.nodes:
        if node.op == "output":
            return isinstance(node.args[0], (tuple, list))
    return False


def compile(fn, dynamic=False):  # noqa: A001 - torch.compile's name
    """``fn`` (a function or module) as a graph on the card: see the module
    docstring."""
    del dynamic  # shapes are always specialised
    return CompiledFunction(fn)
