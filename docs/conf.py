r"""Sphinx configuration of the ikgat documentation.

Build (from the repository root, after ``pip install -e ".[test,docs]"``)::

    sphinx-build -W --keep-going -n -d docs/_build/doctrees -b html docs \
        docs/_build/html
    sphinx-build -W --keep-going -n -d docs/_build/doctrees -b doctest docs \
        docs/_build/doctest

At build time ``docs/_ext/ikgat_docs.py`` writes the API pages (one per module
found by walking the installed package, so a new module is documented without
editing these files), the kernel table (from :data:`ikgat.kernels.KERNELS`)
and the command-line help into ``docs/api/`` and ``docs/_generated/``.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '_ext'))

import ikgat  # noqa: E402

project = 'ikgat'
author = 'the ikgat authors'
copyright = '2026, the ikgat authors'
release = ikgat.__version__
version = release

extensions = [
    'sphinx.ext.autodoc',
    'sphinx.ext.napoleon',
    'sphinx.ext.mathjax',
    'sphinx.ext.doctest',
    'sphinx.ext.viewcode',
    'myst_parser',
    'ikgat_docs',
]

source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
exclude_patterns = ['_build', '_generated', 'Thumbs.db', '.DS_Store']
root_doc = 'index'

html_theme = 'furo'
html_title = f'ikgat {release}'
# Wide tables scroll inside their own box; multi-panel figures take the
# column's width (docs/_static/ikgat.css).
html_static_path = ['_static']
html_css_files = ['ikgat.css']

myst_enable_extensions = ['dollarmath', 'amsmath', 'colon_fence']
myst_heading_anchors = 3

# The docstrings follow PyG's layout: Google-style 'Args:' sections.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# 'Attributes:' as fields: a NamedTuple's fields are documented by autodoc.
napoleon_use_ivar = True
autodoc_default_options = {
    'members': True,
    'undoc-members': False,
    'show-inheritance': True,
    'member-order': 'bysource',
    # A package's __all__ lists the layers it re-exports; they are documented
    # once, on the page of the module that defines them.
    'ignore-module-all': True,
}
autodoc_typehints = 'signature'
# torch.autograd.Function's forward/backward docstrings are torch's, not ours.
autodoc_inherit_docstrings = False
autodoc_member_order = 'bysource'
# The constructor's signature in the class's heading, at the top of a layer's
# page ('separated' showed it as an __init__ entry among the members).
autodoc_class_signature = 'mixed'

# There is no internet at build time, so intersphinx cannot fetch torch's,
# PyG's, numpy's or Python's inventories. References into those projects are
# not checked (the regular expressions below); every reference to ikgat's own
# objects must resolve, and '-n' (nitpicky) with '-W' fails the build when one
# does not.
nitpicky = True
nitpick_ignore_regex = [
    (r'py:.*', r'(torch|torch_geometric|torch_sparse|torch_scatter|triton|tl'
     r'|numpy|np|scipy|matplotlib|sklearn|tqdm|ogb|argparse|collections|contextlib|typing'
     r'|typing_extensions|os|pathlib|io|enum|abc|types|weakref|warnings'
     r'|dataclasses|functools|multiprocessing|threading|sys|importlib|ctypes'
     r'|concurrent)(\..*)?'),
    # Names that type hints and docstrings take from those projects without
    # their module (PyG's aliases, torch's and numpy's classes).
    (r'py:.*', r'(Tensor|Parameter|Module|Data|HeteroData|Adj|OptTensor'
     r'|PairTensor|OptPairTensor|Size|NoneType|SparseTensor|EdgeIndex'
     r'|MessagePassing|GATConv|NeighborLoader|Optimizer|Generator|dtype'
     r'|device|ndarray|Figure|Axes|Namespace|ArgumentParser|Path'
     r'|DistributedDataParallel|ProcessGroup|TorchDispatchMode|Function'
     r'|FunctionCtx|Library|Callable|Iterator|Iterable|Sequence|Mapping'
     r'|callable|optional|default|array_like|sequence)'),
    # Constants rendered in signatures, e.g. a default of 'eager'.
    (r'py:.*', r"'.*'|\".*\""),
    # The docstrings follow PyG's convention of :obj:`...` for code literals
    # (:obj:`True`, :obj:`edge_index`, :obj:`0.2`); an :obj: reference must
    # resolve only where it names an ikgat object by its dotted path.
    ('py:obj', r'(?!ikgat\.).*'),
    # Private names are not documented, so a reference to one cannot resolve.
    (r'py:.*', r'(.*\.)?_[a-z].*'),
    # MessagePassing's API, inherited by the layers (PyG's documentation).
    (r'py:(meth|attr|func)', r'(propagate|edge_updater|edge_update|message'
     r'|aggregate|update|message_and_aggregate|explain|__init_subclass__'
     r'|forward|reset_parameters|state_dict|load_state_dict)'),
]

# Doctests: the examples of the docstrings and of these pages.
doctest_global_setup = '''
import torch
torch.manual_seed(0)
'''
