r"""Old names that still work for one release, each with a
:class:`DeprecationWarning` that says what to use instead.

* :data:`MOVED_MODULES`: modules that moved (the backends went from
  :mod:`ikgat.nn` and :mod:`ikgat.kernels` to :mod:`ikgat.ops`) or were
  renamed.
  ``import ikgat.nn.triton_attention`` still works: the old name is an
  alias of the new module, found by :class:`MovedModuleFinder`, which
  :mod:`ikgat` installs on :data:`sys.meta_path`.
* :func:`moved_names`: names of a module that moved or were renamed (a
  module-level ``__getattr__``).
* :func:`renamed_argument`: an argument under its previous name.
"""
import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any, Callable, Dict, Tuple

#: Old module name -> new module name.
MOVED_MODULES: Dict[str, str] = {
    'ikgat.nn.triton_attention': 'ikgat.ops.gat_attention',
    'ikgat.nn.triton_transformer': 'ikgat.ops.transformer_attention',
    'ikgat.nn.triton_softmax': 'ikgat.ops.attention_steps',
    'ikgat.nn.triton_fourier_pairs': 'ikgat.ops.transformer_fourier',
    'ikgat.nn.pair_tables': 'ikgat.ops.node_tables',
    'ikgat.nn.edge_softmax': 'ikgat.ops.edge_softmax',
    'ikgat.nn.aggregation': 'ikgat.ops.aggregation',
    'ikgat.nn.chunking': 'ikgat.ops.chunking',
    'ikgat.nn.dtypes': 'ikgat.ops.dtypes',
    'ikgat.kernels.triton_runtime': 'ikgat.ops.runtime',
    'ikgat.kernels.triton_fourier': 'ikgat.ops.node_terms_triton',
    'ikgat.kernels.fused_fourier': 'ikgat.ops.node_terms',
    'ikgat.kernels.pairwise_fourier': 'ikgat.ops.edge_fourier',
    'ikgat.kernels.compiled_features': 'ikgat.ops.compiled_features',
    'ikgat.kernels.trigonometry': 'ikgat.ops.trigonometry',
    'ikgat.kernels.compiled': 'ikgat.ops.compiled',
    'ikgat.nn.kl': 'ikgat.nn.losses',
    # Renamed to say what they hold:
    'ikgat.train_layers': 'ikgat.training.layer_recipes',
    'ikgat.durable': 'ikgat.atomic_writes',
    # The application in packages of one concept each:
    'ikgat.datasets': 'ikgat.data',
    'ikgat.layer_recipes': 'ikgat.training.layer_recipes',
    'ikgat.checkpoints': 'ikgat.training.checkpoints',
    'ikgat.distributed': 'ikgat.training.distributed',
    'ikgat.sampling': 'ikgat.training.sampling',
    'ikgat.metric_inputs': 'ikgat.metrics.inputs',
    'ikgat.attention_capture': 'ikgat.inspection.capture',
    'ikgat.attention_terms': 'ikgat.inspection.terms',
    'ikgat.visualization': 'ikgat.inspection.figures',
    'ikgat.cli_arguments': 'ikgat.cli.arguments',
    'ikgat.cli_plot': 'ikgat.cli.plot',
}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    r"""Imports a name of :data:`MOVED_MODULES` as the module it moved to
    (the same module object, so that patching either name patches both),
    with a :class:`DeprecationWarning` naming the new import."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new_name = MOVED_MODULES[spec.name]
        warnings.warn(f"{spec.name} moved to {new_name}; import it from "
                      f"there (the old name will be removed in the next "
                      f"release)", DeprecationWarning, stacklevel=2)
        return _AliasModule(spec.name, importlib.import_module(new_name))

    def exec_module(self, module):
        sys.modules[module.__name__] = module.target


class _AliasModule(type(sys)):
    r"""Stands for a moved module while the import machinery sets it up
    (its attributes are the new module's); :meth:`exec_module` then puts
    the new module itself under the old name."""

    def __init__(self, name: str, target):
        super().__init__(name)
        self.target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def install() -> None:
    r"""Put :class:`MovedModuleFinder` on :data:`sys.meta_path` (once)."""
    if not any(isinstance(finder, MovedModuleFinder)
               for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())


def moved_names(module: str, moved: Dict[str, Tuple[str, str]]
                ) -> Callable[[str], Any]:
    r"""A module-level ``__getattr__`` for :obj:`module` that gives each
    old name of :obj:`moved` (old name -> ``(new module, new name)``) with
    a :class:`DeprecationWarning` naming the new import, and raises
    :class:`AttributeError` for any other name."""
    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute "
                                 f"{name!r}")
        new_module, new_name = moved[name]
        warnings.warn(f"{module}.{name} is deprecated; import {new_name} "
                      f"from {new_module}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new_module), new_name)
    return __getattr__


def renamed_argument(owner: str, old: str, new: str, old_value, new_value,
                     new_default):
    r"""Return the value of the argument :obj:`new`, accepting its previous
    name :obj:`old` for one release with a :class:`DeprecationWarning`."""
    if old_value is None:
        return new_value
    if new_value != new_default and new_value != old_value:
        raise TypeError(f"{owner}: got both '{new}={new_value!r}' and its "
                        f"deprecated name '{old}={old_value!r}'; pass "
                        f"'{new}' only")
    warnings.warn(f"{owner}: '{old}' is deprecated and will be removed in "
                  f"the next release; pass '{new}={old_value!r}' instead",
                  DeprecationWarning, stacklevel=3)
    return old_value
