"""Imports inside the package flow one way.  The library (deprecation ->
ops -> kernels -> nn, with reference and norms beside nn) never imports the
application; the application's rooms stand above it in this order: models,
metrics and atomic_writes; data; training; inspection; the command line;
the lab (benchmarks) above all of them.  No module imports another module's
private names, and no module is over 500 lines."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / 'ikgat'

LIBRARY = {'deprecation', 'ops', 'kernels', 'nn', 'reference', 'norms'}
#: Each room (a top-level module or subpackage) and the rooms it may import
#: from.
_BELOW_KERNELS = {'deprecation', 'ops'}
LAYERS = {
    'deprecation': set(),
    'ops': {'deprecation', 'ops'},
    'kernels': _BELOW_KERNELS | {'kernels'},
    'nn': _BELOW_KERNELS | {'kernels', 'nn'},
    'reference': _BELOW_KERNELS | {'kernels', 'nn'},
    'norms': _BELOW_KERNELS | {'nn'},
    'models': LIBRARY,
    'atomic_writes': set(),
    'metrics': {'metrics'},
}
LAYERS['data'] = {'data', 'metrics', 'atomic_writes'}
LAYERS['training'] = LIBRARY | {'models', 'metrics', 'atomic_writes', 'data',
                                'training'}
LAYERS['inspection'] = LIBRARY | {'models', 'inspection'}
LAYERS['cli'] = set(LAYERS) | {'cli'}
#: The package's face may name every room (it imports them lazily).
LAYERS['__init__'] = set(LAYERS)


def layer_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix('.py')


def ikgat_imports(path: Path):
    r"""``(module, names)`` of each import of an ikgat module by
    :obj:`path`."""
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith('ikgat.')):
            yield node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith('ikgat.'):
                    yield alias.name, []


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def test_every_room_has_its_rules():
    rooms = {layer_of(path) for path in PACKAGE.rglob('*.py')}
    assert rooms - {'__main__'} <= set(LAYERS), rooms - set(LAYERS)


def test_imports_flow_one_way():
    wrong = []
    for path in sorted(PACKAGE.rglob('*.py')):
        layer = layer_of(path)
        for module, _ in ikgat_imports(path):
            target = module.split('.')[1]
            if target not in LAYERS[layer]:
                wrong.append(f'{path.relative_to(PACKAGE)} imports {module}')
    assert not wrong, wrong


def test_the_library_never_imports_the_application():
    wrong = []
    for path in sorted(PACKAGE.rglob('*.py')):
        if layer_of(path) in LIBRARY:
            wrong += [f'{path.relative_to(PACKAGE)} imports {module}'
                      for module, _ in ikgat_imports(path)
                      if module.split('.')[1] not in LIBRARY]
    assert not wrong, wrong


def test_no_module_imports_another_modules_private_names():
    wrong = []
    for path in sorted(PACKAGE.rglob('*.py')):
        for module, names in ikgat_imports(path):
            private = [name for name in names if name.startswith('_')
                       and not name.endswith('__')]
            if private and module != module_name(path):
                wrong.append(f'{path.relative_to(PACKAGE)} imports '
                             f'{private} from {module}')
    assert not wrong, wrong


def test_no_application_module_is_over_500_lines():
    long = [f'{path.relative_to(PACKAGE)}: {lines}'
            for path in sorted(PACKAGE.rglob('*.py'))
            if layer_of(path) not in LIBRARY
            and (lines := len(path.read_text().splitlines())) > 500]
    assert not long, long
