"""Old names keep working for one release, with a warning naming the new
one: moved modules are aliases of the modules they moved to."""
import importlib
import sys
import warnings
from pathlib import Path

import pytest

import ikgat
from ikgat.deprecation import MOVED_MODULES


@pytest.mark.parametrize('old, new', sorted(MOVED_MODULES.items()))
def test_a_moved_module_is_its_new_module_with_a_warning(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f'{old} moved to {new}'):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    parent, _, child = old.rpartition('.')
    assert getattr(sys.modules[parent], child) is module


def test_the_old_files_are_gone():
    root = Path(ikgat.__path__[0]).parent
    for old in MOVED_MODULES:
        assert not (root / (old.replace('.', '/') + '.py')).exists(), old


def test_unknown_names_are_not_caught():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module('ikgat.nn.no_such_module')


def test_renamed_names_are_their_new_objects_with_a_warning():
    from ikgat.nn.conv import kernel_attention, lean_hooks
    with pytest.warns(DeprecationWarning,
                      match='import LeanPathSwitches from ikgat.nn.conv'):
        assert lean_hooks.LeanPathHooks is kernel_attention.LeanPathSwitches
    with pytest.warns(DeprecationWarning, match='SKIPPED_STEPS'):
        assert lean_hooks.SKIPPED_STEPS is kernel_attention.SKIPPED_STEPS
    with pytest.raises(AttributeError, match='NoSuchName'):
        _ = lean_hooks.NoSuchName


@pytest.mark.parametrize('old_module, name, new_module', [
    ('ikgat.kernels.base', 'check_positive', 'ikgat.kernels.arguments'),
    ('ikgat.kernels.base', 'check_num_spectral_points',
     'ikgat.kernels.arguments'),
    ('ikgat.kernels.base', 'DeprecatedNumFeatures',
     'ikgat.kernels.arguments'),
    ('ikgat.ops.attention_steps', 'tiling', 'ikgat.ops.tiling'),
    ('ikgat.ops.attention_steps', 'edge_tiling', 'ikgat.ops.tiling'),
    ('ikgat.ops.attention_steps', 'TILE_ELEMENTS', 'ikgat.ops.tiling'),
    ('ikgat.ops.transformer_attention', 'head_block', 'ikgat.ops.tiling'),
    ('ikgat.ops.transformer_attention', 'TABLE_ROW_ELEMENTS',
     'ikgat.ops.transformer_attention_triton'),
    ('ikgat.ops.transformer_attention', 'CHUNKED_TILES',
     'ikgat.ops.transformer_fourier'),
])
def test_names_that_moved_between_modules_still_import(old_module, name,
                                                       new_module):
    old = importlib.import_module(old_module)
    with pytest.warns(DeprecationWarning, match=f'import {name} from '
                      f'{new_module}'):
        value = getattr(old, name)
    assert value is getattr(importlib.import_module(new_module), name)


@pytest.mark.parametrize('old_module, name, new_module', [
    ('ikgat.cli', 'CommandError', 'ikgat.cli.arguments'),
    ('ikgat.cli', 'OneLineParser', 'ikgat.cli.arguments'),
    ('ikgat.cli', 'user_input', 'ikgat.cli.arguments'),
    ('ikgat.cli', 'positive_int', 'ikgat.cli.arguments'),
    ('ikgat.cli', 'PLOT_KINDS', 'ikgat.cli.plot'),
    ('ikgat.cli', 'PLOT_NEEDS', 'ikgat.cli.plot'),
    ('ikgat.cli', 'TRANSFORMER_OPTIONS', 'ikgat.cli.plot'),
    ('ikgat.cli', 'run_train', 'ikgat.cli.train'),
])
def test_the_command_lines_former_names_still_import(old_module, name,
                                                      new_module):
    old = importlib.import_module(old_module)
    with pytest.warns(DeprecationWarning, match=f'import {name} from '
                      f'{new_module}'):
        value = getattr(old, name)
    assert value is getattr(importlib.import_module(new_module), name)


@pytest.mark.parametrize('module, name', [
    ('ikgat.training', 'train_node_classifier'),
    ('ikgat.training', 'variational_adam'),
    ('ikgat.training', 'TrainResult'),
    ('ikgat.inspection', 'AttentionTermsRecorder'),
    ('ikgat.inspection', 'sparsity_statistics'),
    ('ikgat.inspection', 'attention_weights'),
    ('ikgat.metrics', 'ece'),
    ('ikgat.metrics', 'uncertainty_report'),
    ('ikgat.datasets', 'load_planetoid'),
    ('ikgat.datasets', 'toy_citation_graph'),
])
def test_the_former_modules_names_import_from_their_packages(module, name):
    # ikgat.training, .inspection and .metrics became packages that keep
    # the names of the modules they were; ikgat.datasets is ikgat.data.
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        assert getattr(importlib.import_module(module), name) is not None
