r"""How ikgat runs its Triton kernels: the Triton versions the GPU path
supports, one launch function for every kernel, and a one-line error when
Triton cannot build a kernel on the user's machine.

**Supported versions.**  The kernels are compiled for sm_80 and sm_90 with
Triton :data:`MIN_TRITON` (the GPU image's 3.6) and with the newest Triton
CI installs, by ``python -m benchmarks.gpu_compile`` (no GPU needed).  With
an older Triton the layers take their PyTorch path and warn once
(:func:`triton_usable`).

**Launches.**  Every kernel of :mod:`ikgat.ops.node_terms_triton` and
:mod:`ikgat.ops.gat_attention` goes through :func:`launch`.  When Triton's
compiler or ``ptxas`` rejects a kernel (for a GPU or a Triton version it was
not checked on), :func:`launch` raises :class:`KernelBuildError`: one line
naming the kernel, the Triton version and the switch that avoids the
kernel, with Triton's own error as its cause (``ikgat --debug`` prints it).
Nothing falls back silently to a path many times slower.

**Lazy jitting.**  Importing ikgat never imports Triton.  A kernel module
marks its Triton functions with :func:`lazy_jit` (kernels and the device
functions they call alike) and its compile-time globals with
:class:`TritonConstant`, and declares ``triton = tl = None``.  The first
:func:`launch` of one of its kernels (:func:`jitted`) imports Triton and
binds, in that module and in every module whose functions it calls,
``triton``, ``tl``, each marked function's jitted version (one per
function, shared by every module that imports it) and each constant's
``tl.constexpr``: Triton then resolves the names a kernel calls as the
module globals they are.

**Recording.**  Inside :func:`record_launches` nothing is launched: each
launch is recorded as a :class:`KernelLaunch` (the kernel, its argument
types as Triton specialises them, its compile-time constants).  This is how
``benchmarks.gpu_compile`` collects the launch configurations that real
layer calls produce, so that the list it compiles cannot drift from the
code.  The outputs of a recorded launch are left unwritten.
"""
import contextlib
import functools
import importlib
import inspect
import os
import warnings
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

#: The oldest Triton whose compiler builds every kernel (``major, minor``).
MIN_TRITON = (3, 6)
#: Registers per thread every kernel is built with (``.maxnreg``): two
#: 4-warp blocks at 255 registers fill an SM's 64k registers, 128 leaves
#: room for four.  With the bound given, ptxas keeps to it and does not
#: trade spills of cold values for occupancy (which it does unbounded:
#: 4-36 bytes in kernels of 40-128 registers); benchmarks.gpu_compile checks
#: that nothing spills under it.
MAX_REGISTERS = 128

#: The switches that avoid each kernel family, named in
#: :class:`KernelBuildError`.
NODE_TERMS_SWITCH = "kernel_kwargs={'node_path': 'eager'}"
ATTENTION_SWITCH = "fused_attention=False"


_LAZY_JIT = '__ikgat_lazy_jit__'
#: Marked function -> its jitted version.
_JITTED: Dict[Any, Any] = {}


def lazy_jit(function):
    r"""Mark :obj:`function`, a Triton kernel or device function, to be
    jitted with :func:`triton.jit` the first time a kernel of its module is
    launched (see the module docstring)."""
    setattr(function, _LAZY_JIT, True)
    return function


class TritonConstant(NamedTuple):
    r"""A module global that the kernels read as ``tl.constexpr(value)``
    (bound by :func:`jitted`)."""
    value: Any


def import_triton(owner: str) -> Tuple[Any, Any]:
    r"""``(triton, triton.language)``; without Triton, an
    :class:`ImportError` saying that :obj:`owner` needs it and how to
    install it."""
    try:
        import triton
        import triton.language as tl
    except ImportError as error:
        raise ImportError(f"{owner} needs Triton; install it with 'pip "
                          f"install triton' (or ikgat[test])") from error
    return triton, tl


def jitted(function):
    r"""The jitted version of a :func:`lazy_jit` :obj:`function`: on the
    first call for its module, Triton is imported and the module is bound
    (see the module docstring).  A function that is already jitted is
    returned as it is."""
    if not inspect.isfunction(function):
        return function
    if function not in _JITTED:
        triton, tl = import_triton(function.__module__)
        _bind(function.__globals__, triton, tl, set())
    return _JITTED[function]


def _bind(namespace: Dict[str, Any], triton, tl, bound: set) -> None:
    if id(namespace) in bound:
        return
    bound.add(id(namespace))
    namespace.update({name: module for name, module in (('triton', triton),
                                                        ('tl', tl))
                      if name in namespace})
    for name, value in list(namespace.items()):
        if isinstance(value, TritonConstant):
            namespace[name] = tl.constexpr(value.value)
        elif getattr(getattr(value, 'fn', None), _LAZY_JIT, False):
            # Jitted already (a module bound before): the one version.
            _JITTED.setdefault(value.fn, value)
        elif inspect.isfunction(value) and getattr(value, _LAZY_JIT, False):
            if value not in _JITTED:
                _JITTED[value] = triton.jit(value)
                # The module that defines it (its 'tl', its own steps):
                _bind(value.__globals__, triton, tl, bound)
            namespace[name] = _JITTED[value]


def resolve_use_triton(owner: str, use_triton: Optional[bool],
                       device: torch.device) -> bool:
    r"""Whether :obj:`owner` runs its Triton kernels: :obj:`use_triton` if
    given, else on CUDA (and ``meta``, standing for it) tensors, and on CPU
    tensors when Triton's interpreter is on (``TRITON_INTERPRET=1``).
    Kernels that cannot run raise (:func:`check_triton_runs`)."""
    if use_triton is None:
        use_triton = device.type in ('cuda', 'meta') or interpreter_on()
    if use_triton:
        check_triton_runs(owner, device)
    return bool(use_triton)


def interpreter_on() -> bool:
    r"""Whether Triton's interpreter is on (``TRITON_INTERPRET=1``, set
    before Triton is first imported)."""
    return os.environ.get('TRITON_INTERPRET') == '1'


def check_triton_runs(owner: str, device: torch.device) -> None:
    r"""Raise, naming :obj:`owner`, when its Triton kernels cannot run on
    :obj:`device`: Triton missing (reported while not compiling; under
    :func:`torch.compile` the operator reports it when it runs, since
    importing Triton in traced code would break the graph), or CPU tensors
    without the interpreter."""
    if not torch.compiler.is_compiling():
        import_triton(owner)
    if device.type == 'cpu' and not interpreter_on():
        raise RuntimeError(f"{owner} runs Triton kernels: pass CUDA tensors, "
                           f"or set TRITON_INTERPRET=1 before importing "
                           f"triton to interpret them on CPU (slow; for "
                           f"tests), or use_triton=False")


def dropout_seed(owner: str, dropout: float, device: torch.device,
                 unused: Tensor) -> Tensor:
    r"""The seed of an attention dropout mask: drawn on :obj:`device` from
    torch's generator (no host synchronisation; :func:`torch.manual_seed`
    makes runs repeatable).  Without dropout it is never read, and
    :obj:`unused`, any tensor of the device, stands for it.  A probability
    :obj:`dropout` outside :math:`[0, 1]` raises naming :obj:`owner`."""
    if not 0.0 <= dropout <= 1.0:
        raise ValueError(f"{owner}: 'dropout' must lie in [0, 1] (got "
                         f"{dropout!r})")
    if dropout > 0:
        return torch.randint(2**31 - 1, (1, ), device=device)
    return unused


class KernelBuildError(RuntimeError):
    r"""Triton could not build one of ikgat's kernels on this machine.  The
    message is one line; Triton's own report is kept in ``details``
    (``ikgat --debug`` prints it)."""
    def __init__(self, message: str, details: str = ''):
        super().__init__(message)
        self.details = details


class KernelLaunch(NamedTuple):
    r"""One launch seen by :func:`record_launches`."""
    module: str  #: the module that defines the kernel
    name: str  #: the kernel's Python function
    #: Argument name -> Triton type (``'*fp32'``, ``'i32'``, ``'fp32'``,
    #: ``'constexpr'`` ...), in the kernel's parameter order.
    signature: Dict[str, str]
    #: Argument name -> value of the compile-time constants (the
    #: ``tl.constexpr`` parameters, and integers equal to 1, which Triton
    #: specialises as constants).
    constexprs: Dict[str, Any]
    #: Names of the pointer and integer arguments divisible by 16 (Triton's
    #: alignment specialisation).
    aligned: Tuple[str, ...]
    #: Launch options (``num_warps``, ``num_stages``, ``maxnreg``) given
    #: explicitly.
    options: Dict[str, int]
    #: The grid: programs along each axis (not part of :attr:`key`: it
    #: follows the graph's size).
    grid: Tuple[int, ...] = ()

    @property
    def key(self) -> str:
        r"""What tells launches apart: the kernel, the argument types, the
        constants, the alignment hints (which follow the sizes of the graph
        at hand) and the options.  (``benchmarks.gpu_compile`` compiles
        launches that are one build to Triton once.)"""
        return repr((self.module, self.name, sorted(self.signature.items()),
                     sorted(self.constexprs.items()), sorted(self.aligned),
                     sorted(self.options.items())))


_RECORDING: Optional[List[KernelLaunch]] = None


@contextlib.contextmanager
def record_launches() -> Iterator[List[KernelLaunch]]:
    r"""Record the launches of the block instead of running them (see the
    module docstring); yields the list that fills up."""
    global _RECORDING
    previous, _RECORDING = _RECORDING, []
    try:
        yield _RECORDING
    finally:
        _RECORDING = previous


def _parse_version(version: str) -> Tuple[int, ...]:
    numbers = []
    for part in version.split('+')[0].split('.')[:2]:
        digits = ''.join(char for char in part if char.isdigit())
        numbers.append(int(digits or 0))
    return tuple(numbers)


@functools.cache
def triton_usable() -> bool:
    r"""Whether Triton is installed and at least :data:`MIN_TRITON`.  An
    older Triton gives one :class:`RuntimeWarning` per process, and the
    layers take their PyTorch path."""
    try:
        import triton
    except ImportError:
        return False
    if _parse_version(triton.__version__) < MIN_TRITON:
        oldest = '.'.join(map(str, MIN_TRITON))
        warnings.warn(
            f"ikgat: Triton {triton.__version__} is older than {oldest}, the "
            f"oldest its GPU kernels are built with; the layers take their "
            f"PyTorch path (pip install 'triton>={oldest}' for the kernels)",
            RuntimeWarning, stacklevel=2)
        return False
    return True


def _triton_type(value: Any) -> Tuple[str, bool]:
    r"""Triton's type for an argument, and whether it is divisible by 16
    (pointers: their address; integers: their value)."""
    if isinstance(value, Tensor):
        name = {torch.float32: 'fp32', torch.float16: 'fp16',
                torch.bfloat16: 'bf16', torch.float64: 'fp64',
                torch.int64: 'i64', torch.int32: 'i32', torch.int16: 'i16',
                torch.int8: 'i8', torch.uint8: 'u8',
                torch.bool: 'i1'}[value.dtype]
        return '*' + name, value.data_ptr() % 16 == 0
    if isinstance(value, bool):
        return 'i1', False
    if isinstance(value, int):
        return ('i32' if -2**31 <= value < 2**31 else 'i64'), value % 16 == 0
    if isinstance(value, float):
        return 'fp32', False
    raise TypeError(f"record_launches: no Triton type for {type(value)}")


def _record(kernel, grid: Tuple[int, ...], args: Tuple[Any, ...],
            kwargs: Dict[str, Any]) -> None:
    parameters = inspect.signature(kernel.fn).parameters
    names = list(parameters)
    options = {name: kwargs.pop(name) for name in ('num_warps', 'num_stages',
                                                   'maxnreg')
               if name in kwargs}
    values = dict(zip(names, args), **kwargs)
    signature, constexprs, aligned = {}, {}, []
    for name, parameter in parameters.items():
        value = values[name]
        # A 'tl.constexpr' annotation (a string under the kernels' postponed
        # annotations), or an integer equal to 1, which Triton specialises:
        if 'constexpr' in str(parameter.annotation) or (
                type(value) is int and value == 1):
            signature[name], constexprs[name] = 'constexpr', value
            continue
        signature[name], divisible = _triton_type(value)
        if divisible:
            aligned.append(name)
    _RECORDING.append(KernelLaunch(kernel.fn.__module__, kernel.fn.__name__,
                                   signature, constexprs, tuple(aligned),
                                   options, tuple(int(n) for n in grid)))


def _build_errors() -> Tuple[type, ...]:
    from triton.compiler.errors import CompilationError
    from triton.runtime import errors
    return (CompilationError, ) + tuple(
        getattr(errors, name) for name in ('OutOfResources', 'PTXASError')
        if hasattr(errors, name))


def launch(kernel, grid: Tuple[int, ...], *args: Any, switch: str,
           **kwargs: Any) -> None:
    r"""Run the jitted :obj:`kernel` on :obj:`grid` with :obj:`args` and the
    keyword constants and options :obj:`kwargs`, at most
    :data:`MAX_REGISTERS` registers per thread (or record it, inside
    :func:`record_launches`).  A kernel that Triton cannot build raises
    :class:`KernelBuildError` naming :obj:`switch`, the option that avoids
    the kernel."""
    kwargs.setdefault('maxnreg', MAX_REGISTERS)
    kernel = jitted(kernel)
    if _RECORDING is not None:
        _record(kernel, grid, args, dict(kwargs))
        return
    try:
        kernel[grid](*args, **kwargs)
    except _build_errors() as error:
        import traceback

        import triton
        raise KernelBuildError(
            f"ikgat: Triton {triton.__version__} could not build the kernel "
            f"{kernel.fn.__name__} ({build_error_reason(error)}); pass {switch} "
            f"to avoid it", ''.join(traceback.format_exception(error))
        ) from None


def build_error_reason(error: BaseException) -> str:
    r"""The most specific line of a Triton error: the innermost cause's
    message (a compilation error's first lines are source excerpts)."""
    while error.__cause__ is not None:
        error = error.__cause__
    message = getattr(error, 'error_message', None) or str(error)
    lines = [line.strip() for line in str(message).splitlines()
             if line.strip() and set(line.strip()) != {'^'}]
    reason = lines[-1] if lines else ''
    return f'{type(error).__name__}: {reason[:200]}'


def next_power_of_2(n: int) -> int:
    r"""The smallest power of two :math:`\ge n` (at least 1): Triton's
    block sizes."""
    return 1 << max(0, int(n) - 1).bit_length()


def jitted_kernel(module: str, name: str):
    r"""The jitted kernel :obj:`name` of :obj:`module` (for
    ``benchmarks.gpu_compile``)."""
    kernel = getattr(importlib.import_module(module), name, None)
    if kernel is None:
        raise KeyError(f"{module} has no kernel {name!r}")
    return jitted(kernel)
