r"""The bytes held by live tensors while a block of code runs, on any device,
the ``meta`` device included (where nothing is allocated): a dispatch mode
that counts each storage an operation returns, from its creation until it
is freed.

Each storage is counted once, at the first operation that returns it, for
its bytes rounded up to :obj:`block` (512: the CUDA caching allocator
rounds every request so, and ``torch.cuda.memory_allocated`` sums its
blocks; a block it does not split can count up to about 1 MiB more, so the
sum is approximate for large tensors).  Storages
that already existed when an operation received them (the inputs, the
parameters built before the block) are never counted, nor are the buffers a
kernel allocates for itself (cuBLAS workspaces, the temporary storage of a
CUDA sort).  A storage is freed when its last tensor goes, so the tensors
autograd saves for the backward pass count until the backward pass frees
them.

Used by the breakdown of :mod:`benchmarks.scale` (where a CPU step's memory
goes) and by :mod:`benchmarks.gpu_memory` (a CUDA step's memory, run on the
meta device).
"""
import weakref
from typing import Dict, List, NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary


class LiveTensor(NamedTuple):
    r"""One counted storage: its bytes, the phase and operation that
    created it, and the shape and dtype of the tensor it was returned as."""
    bytes: int
    phase: str
    op: str
    shape: tuple
    dtype: str


class LiveTensorBytes(TorchDispatchMode):
    r"""Counts the bytes of the storages that operations create while the
    mode is active and that are still alive.

    Attributes:
        now (int): The bytes alive now.
        peak (int): The largest :attr:`now` since the start or the last
            :meth:`reset_peak`.
        at_peak (list of LiveTensor): The storages alive at :attr:`peak`
            (kept only with :obj:`keep_peak_tensors`).
        phase (str): A label stored with each storage created from now on
            (e.g. ``'forward'``, ``'backward'``).

    Args:
        block (int, optional): Round each storage up to a multiple of this
            many bytes. (default: :obj:`1`)
        keep_peak_tensors (bool, optional): Record :attr:`at_peak`, a copy
            of the live list at each new peak. (default: :obj:`False`)
    """
    def __init__(self, block: int = 1, keep_peak_tensors: bool = False):
        super().__init__()
        if block < 1:
            raise ValueError(f"LiveTensorBytes: 'block' must be a positive "
                             f"number of bytes (got {block!r})")
        self.block = block
        self.keep_peak_tensors = keep_peak_tensors
        self.now = self.peak = 0
        self.at_peak: List[LiveTensor] = []
        self.phase = ''
        self._known = WeakIdKeyDictionary()  # storage -> counted or not
        self._live: Dict[int, LiveTensor] = {}
        self._next_key = 0

    def reset_peak(self) -> None:
        r"""Start a new peak from the bytes alive now."""
        self.peak = self.now
        if self.keep_peak_tensors:
            self.at_peak = list(self._live.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        for tensor in tree_leaves((args, kwargs)):
            if isinstance(tensor, torch.Tensor):
                self._known.setdefault(tensor.untyped_storage(), False)
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                self._count(tensor, func.overloadpacket.__name__)
        return out

    def _count(self, tensor: torch.Tensor, op: str) -> None:
        storage = tensor.untyped_storage()
        if storage in self._known:
            return
        size = -(-storage.nbytes() // self.block) * self.block
        self._known[storage] = True
        if size == 0:
            return
        key, self._next_key = self._next_key, self._next_key + 1
        self._live[key] = LiveTensor(size, self.phase, op,
                                     tuple(tensor.shape),
                                     str(tensor.dtype).replace('torch.', ''))
        self.now += size
        weakref.finalize(storage, self._release, key)
        if self.now > self.peak:
            self.peak = self.now
            if self.keep_peak_tensors:
                self.at_peak = list(self._live.values())

    def _release(self, key: int) -> None:
        self.now -= self._live.pop(key).bytes
