r"""Docstring fragments that several objects share, written once.

A docstring names a fragment on a line of its own, in braces
(``{random_fourier_arguments}``), indented as the fragment is to be;
:func:`fill_fragments` puts the fragment there when the class or function
is defined, as torch writes the arguments its functions share once
(``add_docstr`` with ``format(**common_args)``).  Only a line that is
nothing but the braced name of a fragment is replaced, so the braces of
the docstrings' LaTeX are left alone, and a misspelt name is an error
when the module is imported.

This module holds the mechanism and the kernels' fragments
(:func:`shared_docstring`); the layers' fragments are in
:mod:`ikgat.nn.conv.docstrings`.
"""
import inspect
import re
from typing import Dict, Mapping, TypeVar

#: A class or a function, returned by the decorators as given.
Documented = TypeVar('Documented')

#: The constructor arguments of the random-feature kernels with fixed or
#: learned spectral points (:class:`~ikgat.kernels.RandomFourierKernel`
#: and its subclasses).
RANDOM_FOURIER_ARGUMENTS = r"""
heads (int): Number of heads :math:`H`.
channels (int): Channels per head :math:`C`.
num_spectral_points (int, optional): :math:`R`, the spectral points
    per head (formerly ``num_features``, still accepted with a
    :class:`DeprecationWarning`). (default: :obj:`None`, the kernel's
    :attr:`~ikgat.kernels.Kernel.default_num_spectral_points`: 16 for
    ``direct``, 64 for the others)
lengthscale (float, optional): :math:`l` of the spectral density
    :math:`\mathcal{N}(0, I/(2l^2))` (the initial one of learned
    spectral points). (default: :obj:`1.0`)
eps (float, optional): :math:`\epsilon` in
    :math:`\log(f^2 + \epsilon)`, the similarity's floor
    (:data:`~ikgat.kernels.random_features.DEFAULT_EPS`).
    (default: :obj:`1e-2`)
node_path (str, optional): How the node-wise term is evaluated, one
    of :obj:`~ikgat.kernels.random_features.NODE_PATHS`.
    (default: :obj:`"eager"`)"""

#: The kernels' fragments by the name a docstring gives them.
FRAGMENTS: Dict[str, str] = {
    'random_fourier_arguments': RANDOM_FOURIER_ARGUMENTS,
}

_PLACEHOLDER = re.compile(r'^(?P<indent>[ \t]*)\{(?P<name>\w+)\}[ \t]*$',
                          re.MULTILINE)


def fill_fragments(documented: Documented,
                   fragments: Mapping[str, str]) -> Documented:
    r"""Replace each line ``{name}`` of the docstring of :obj:`documented`
    (a class or a function) by :obj:`fragments[name]`, every line of it
    indented as the placeholder is; for a class, also in the docstrings of
    the functions its body defines (its own methods, e.g. ``forward``).
    Returns :obj:`documented`.  A docstring stripped by ``python -OO``
    stays :obj:`None`."""
    owners = [documented]
    if inspect.isclass(documented):
        owners += [member for member in vars(documented).values()
                   if inspect.isfunction(member)]
    for owner in owners:
        if owner.__doc__ is not None:
            owner.__doc__ = _filled(owner.__doc__, fragments,
                                    owner.__qualname__)
    return documented


def _filled(docstring: str, fragments: Mapping[str, str], owner: str) -> str:
    def fragment(match: 're.Match[str]') -> str:
        name, indent = match['name'], match['indent']
        if name not in fragments:
            raise KeyError(f'{owner}: no docstring fragment {name!r} '
                           f'(known: {sorted(fragments)})')
        return '\n'.join(indent + line if line else line
                         for line in fragments[name].strip('\n').splitlines())

    return _PLACEHOLDER.sub(fragment, docstring)


def shared_docstring(documented: Documented) -> Documented:
    r"""Class or function decorator: :func:`fill_fragments` with the
    kernels' :data:`FRAGMENTS`."""
    return fill_fragments(documented, FRAGMENTS)
