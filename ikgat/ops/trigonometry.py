r"""Cosines and sines of the random-feature angles, for the CPU paths of
:mod:`ikgat.ops.node_terms` (node against anchor) and
:mod:`ikgat.ops.edge_fourier` (query against key).

:func:`cos_sin` returns :math:`\cos a` and :math:`\sin a` of a tensor of
angles, from NumPy's ufuncs or from ATen's, whichever is faster on the
machine's kind of CPU; both are equally accurate (within :math:`2 \cdot
10^{-7}` of float64 over :math:`|a| \le 250`;
``tests/ops/test_trigonometry.py``).  The per-element times, on one
thread::

    OMP_NUM_THREADS=1 python -m timeit -s "import numpy as np, torch; \
        a = torch.randn(262144) * 10; x = a.numpy(); y = x.copy()" \
        "np.cos(x, out=y)"    # and "torch.cos(a, out=a.clone())"

* Where ATen runs its AVX2 loops (an AMD EPYC of
  ``benchmarks/results/transformer_speed.md``), NumPy's float32 and
  float64 ``cos``/``sin`` SIMD loops are about 2.6 times faster per
  thread (0.53 against 1.33 ns per float32 element).
* Where ATen runs its AVX-512 loops on an AMD EPYC (2026-12-07, NumPy
  2.4.6, torch 2.13.0), NumPy's are 2.7 times faster: 0.43 against 1.18
  ns per element written in place into a chunk of :math:`2^{18}`.
* Where ATen runs its AVX-512 loops on an Intel Xeon the order reverses,
  0.65 against 1.16 ns, and a whole training epoch of the GAT recipe
  with ``IKGATConv`` ``direct`` on Cora went from 1.92 to 1.77 times
  GATConv's (MIKANConv 1.69 to 1.59, ``implicit`` 1.58 to 1.49; one
  thread, interleaved rounds in one process).

So ATen's loops are used on Intel CPUs where they run AVX-512
(:data:`ATEN_FASTER`), NumPy's elsewhere while torch runs on at most
:data:`NUMPY_THREADS` threads.

The choice depends on the machine only, not on a timing at run time, so
that a seeded run computes the same numbers on the same machine.  NumPy's
loops run on one thread, so that with more torch threads ATen's parallel
ones are used.  The arrays share the tensors' memory: nothing is copied.
"""
import platform
from typing import Optional, Tuple

import numpy as np
import torch
from torch import Tensor

#: The most torch threads for which NumPy's single-threaded ufuncs are
#: used (beyond it ATen's multi-threaded kernels are faster).
NUMPY_THREADS = 2


def _intel_cpu() -> bool:
    r"""Whether the CPU is Intel's: the ``vendor_id`` of ``/proc/cpuinfo``
    (Linux), else :func:`platform.processor`."""
    try:
        with open('/proc/cpuinfo') as file:
            for line in file:
                if line.startswith('vendor_id'):
                    return 'GenuineIntel' in line
    except OSError:
        pass
    return 'Intel' in platform.processor()


#: Whether ATen's sines and cosines beat NumPy's on this machine: its
#: AVX-512 loops (torch's CPU capability) on an Intel CPU.  Then NumPy's
#: are never used.
ATEN_FASTER = (torch.backends.cpu.get_cpu_capability() == 'AVX512'
               and _intel_cpu())


def _numpy_applies(angles: Tensor) -> bool:
    return (angles.device.type == 'cpu'
            and angles.dtype in (torch.float32, torch.float64)
            and not angles.requires_grad
            and not ATEN_FASTER
            and torch.get_num_threads() <= NUMPY_THREADS)


def cos_sin(angles: Tensor, cos: Optional[Tensor] = None,
            sin: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    r"""Return :math:`(\cos a, \sin a)` of :obj:`angles`, written into
    :obj:`cos` and :obj:`sin` when given (tensors of the angles' shape,
    dtype and device; :obj:`sin` may be :obj:`angles` itself, overwritten
    after the cosines are taken).  Not differentiable: for the custom
    operators' forward and backward implementations."""
    if cos is None:
        cos = torch.empty_like(angles, memory_format=torch.contiguous_format)
    if sin is None:
        sin = torch.empty_like(angles, memory_format=torch.contiguous_format)
    if _numpy_applies(angles) and cos.dtype == sin.dtype == angles.dtype:
        values = angles.numpy()
        np.cos(values, out=cos.numpy())
        np.sin(values, out=sin.numpy())
    else:
        torch.cos(angles, out=cos)
        torch.sin(angles, out=sin)
    return cos, sin
