r"""A function through :func:`torch.compile` that falls back to itself.

The CPU paths that Inductor speeds up (:mod:`ikgat.ops.node_terms`'s
``node_path='compile'``, :mod:`ikgat.ops.compiled_features`) must still
run where compiling fails, on a machine without a C++ compiler for one:
:class:`CompiledOrEager` compiles on the first call (dynamic shapes), so
that importing it does not import the compiler, and,
if that fails, warns once and calls the plain function from then on.
"""
import warnings
from typing import Callable, Optional

import torch


class CompiledOrEager:
    r""":obj:`function` through :func:`torch.compile` (``dynamic=True``),
    or :obj:`function` itself after compiling it failed.

    Args:
        function (callable): A function of tensors and sizes.
        what (str): What it computes and what runs instead, for the
            warning (``"<what> failed (<error>); <fallback>"``).
        fallback (str): The sentence after the error in the warning.
        on_failure (callable, optional): Called once, after the warning.
    """

    def __init__(self, function: Callable, what: str, fallback: str,
                 on_failure: Optional[Callable[[], None]] = None):
        self.function = function
        self.what, self.fallback = what, fallback
        self.on_failure = on_failure
        # torch.compile on the first call: importing the compiler takes
        # over a second, which a process that never calls pays otherwise.
        self.compiled: Optional[Callable] = None
        self.failed = False

    def __call__(self, *args):
        if not self.failed:
            try:
                if self.compiled is None:
                    self.compiled = torch.compile(self.function,
                                                  dynamic=True)
                return self.compiled(*args)
            # Compiler failures share no base class; an error of the
            # function itself is raised again by the plain call below.
            except Exception as error:
                warnings.warn(f'{self.what} failed ({type(error).__name__}: '
                              f'{error}); {self.fallback}', RuntimeWarning,
                              stacklevel=2)
                self.compiled, self.failed = None, True
                if self.on_failure is not None:
                    self.on_failure()
        return self.function(*args)
