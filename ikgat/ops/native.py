r"""C kernels of ikgat, built on first use with the machine's C compiler and
loaded with :mod:`ctypes`: :func:`load` returns the library built from
``ikgat/ops/<name>.c``, or :obj:`None` where none can be built.

Why C, and why at run time: the random-feature node terms on CPU are one
loop of angles, cosines, sines and sums (:mod:`ikgat.ops.node_terms`), and
KEPGATConv's sample one of small products and norms per node
(:mod:`ikgat.nn.svgp_sample`); as ATen operations on chunks they pass over
memory a dozen times, and through :func:`torch.compile` the first call
costs 10-17 s of compiling, more than a Cora-size training run saves.  A C
file of a few loops compiles in a few seconds (2.7 s for the node terms,
their common sizes compiled apart), with ``-march=native`` for the machine
it runs on and glibc's vector cosines and sines (libmvec), and is kept in
a cache directory (:func:`cache_dir`), so that later processes load it at
once.  The kernels take a range of heads a call, so that
:func:`split_heads` can share a call's heads among torch's threads.

Where it applies: Linux on x86-64 with glibc's libmvec (``-lmvec``) and a C
compiler (``$CC``, else ``cc``).  Elsewhere, or where the build fails (a
warning then says why), :func:`load` returns :obj:`None` and the callers
run their PyTorch path; ``IKGAT_NATIVE=0`` in the environment (or
:data:`ENABLED` set to :obj:`False`) does the same.
A build is written to a temporary file and renamed into place, so that
processes building at once (a DDP launch) never load a partial library.
Its name holds a hash of the source, the flags, the compiler and the CPU's
feature flags: a change of any of them builds anew.
"""
import ctypes
import functools
import hashlib
import os
import os.path as osp
import platform
import shutil
import subprocess
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

import torch

#: Whether the C kernels may be used at all: cleared by the environment
#: variable ``IKGAT_NATIVE=0`` (or by tests and benchmarks, to run the
#: PyTorch paths).
ENABLED = os.environ.get('IKGAT_NATIVE', '1') != '0'
#: The compiler's flags: optimised for this machine's CPU, the vector
#: functions of libmvec called without ``-ffast-math`` (whose assumption of
#: no NaN could change how a NaN input propagates).
FLAGS = ('-O3', '-march=native', '-fno-math-errno', '-fno-trapping-math',
         '-fopenmp-simd', '-shared', '-fPIC')
LIBRARIES = ('-lmvec', '-lm')
#: The longest a build may take, in seconds.
BUILD_TIMEOUT = 120


def cache_dir() -> str:
    r"""Where the built libraries are kept: ``$IKGAT_CACHE/native`` if set,
    else ``native`` in ikgat's folder of ``$XDG_CACHE_HOME`` (default
    ``~/.cache``)."""
    root = os.environ.get('IKGAT_CACHE')
    if not root:
        root = osp.join(os.environ.get('XDG_CACHE_HOME')
                        or osp.join(osp.expanduser('~'), '.cache'), 'ikgat')
    return osp.join(root, 'native')


def supported() -> bool:
    r"""Whether the platform has what the kernels need: Linux on x86-64
    (glibc's libmvec)."""
    return (sys.platform.startswith('linux')
            and platform.machine() in ('x86_64', 'AMD64'))


def compiler() -> Optional[str]:
    r"""The C compiler: ``$CC`` if set, else ``cc`` on the ``PATH``."""
    return os.environ.get('CC') or shutil.which('cc')


def _cpu_flags() -> str:
    try:
        with open('/proc/cpuinfo') as file:
            for line in file:
                if line.startswith('flags'):
                    return line
    except OSError:
        pass
    return platform.processor()


def _library_path(source: str, cc: str) -> str:
    digest = hashlib.sha256()
    with open(source, 'rb') as file:
        digest.update(file.read())
    for part in (*FLAGS, *LIBRARIES, cc, _cpu_flags()):
        digest.update(part.encode() + b'\0')
    name = osp.splitext(osp.basename(source))[0]
    return osp.join(cache_dir(), f'{name}-{digest.hexdigest()[:16]}.so')


def _build(source: str, target: str, cc: str) -> None:
    r"""Compile :obj:`source` into :obj:`target` through a temporary file
    in the same folder, renamed into place."""
    os.makedirs(osp.dirname(target), exist_ok=True)
    handle, partial = tempfile.mkstemp(suffix='.so',
                                       dir=osp.dirname(target))
    os.close(handle)
    try:
        result = subprocess.run(
            [cc, *FLAGS, '-o', partial, source, *LIBRARIES],
            capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        if result.returncode != 0:
            message = (result.stderr.strip().splitlines() or ['?'])[-1]
            raise RuntimeError(f'{cc} failed: {message}')
        os.replace(partial, target)
    finally:
        if osp.exists(partial):
            os.remove(partial)


@functools.cache
def _load(name: str) -> Optional[ctypes.CDLL]:
    cc = compiler()
    if not supported() or cc is None:
        return None
    source = osp.join(osp.dirname(__file__), f'{name}.c')
    try:
        target = _library_path(source, cc)
        if not osp.exists(target):
            _build(source, target, cc)
        return ctypes.CDLL(target)
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        warnings.warn(f"ikgat: the C kernels of {name}.c could not be built "
                      f"({error}); using the PyTorch path (set CC to another "
                      f"compiler, or IKGAT_CACHE to a writable folder)",
                      RuntimeWarning, stacklevel=3)
        return None


def load(name: str) -> Optional[ctypes.CDLL]:
    r"""The library built from ``ikgat/ops/<name>.c`` (once a process), or
    :obj:`None` where :data:`ENABLED` is cleared, the platform is not
    :func:`supported`, there is no :func:`compiler` or the build fails (a
    warning, once)."""
    return _load(name) if ENABLED else None


#: The threads that share a call's heads (made when first needed), how
#: many, and the process that made them: a forked child has none of its
#: parent's threads, so it makes its own.
_executor: Optional[ThreadPoolExecutor] = None
_executor_workers = 0
_executor_pid = 0


def split_heads(call: Callable[[int, int], None], heads: int) -> None:
    r"""``call(h0, h1)`` over the heads ``[0, heads)``, split among torch's
    threads (:func:`torch.get_num_threads`); the kernels release the GIL
    and each writes its own heads' outputs."""
    global _executor, _executor_workers, _executor_pid
    workers = min(torch.get_num_threads(), heads)
    if workers <= 1:
        return call(0, heads)
    if (_executor is None or _executor_workers < workers
            or _executor_pid != os.getpid()):
        _executor = ThreadPoolExecutor(max_workers=workers)
        _executor_workers, _executor_pid = workers, os.getpid()
    bounds = [heads * k // workers for k in range(workers + 1)]
    for future in [_executor.submit(call, bounds[k], bounds[k + 1])
                   for k in range(workers)]:
        future.result()
