"""Imports inside the library flow one way: deprecation -> ops -> kernels ->
nn -> models -> attention_capture -> attention_terms -> inspection ->
visualization, and metric_inputs -> metrics; the command line sits above
them (cli_arguments -> cli_plot -> cli), and the lab above it."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / 'ikgat'

#: Each layer and the layers it may import from.
_BELOW_KERNELS = {'deprecation', 'ops'}
LAYERS = {
    'deprecation': set(),
    'ops': {'deprecation', 'ops'},
    'kernels': _BELOW_KERNELS | {'kernels'},
    'nn': _BELOW_KERNELS | {'kernels', 'nn'},
    'reference': _BELOW_KERNELS | {'kernels', 'nn'},
    'models': _BELOW_KERNELS | {'kernels', 'nn'},
    'attention_capture': _BELOW_KERNELS | {'kernels', 'nn', 'models'},
    'attention_terms': _BELOW_KERNELS | {'kernels', 'nn', 'models',
                                         'attention_capture'},
    'inspection': _BELOW_KERNELS | {'kernels', 'nn', 'models',
                                    'attention_capture', 'attention_terms'},
    'visualization': _BELOW_KERNELS | {'kernels', 'nn', 'models',
                                       'attention_capture', 'attention_terms',
                                       'inspection'},
    'metric_inputs': set(),
    'metrics': {'metric_inputs'},
}
#: The command line may import the whole library, and its parts one way.
_CLI = ('cli_arguments', 'cli_plot', 'cli')
_LIBRARY = {path.name.removesuffix('.py') for path in PACKAGE.iterdir()
            if not path.name.startswith('_')} - set(_CLI)
for _position, _part in enumerate(_CLI):
    LAYERS[_part] = _LIBRARY | set(_CLI[:_position])


def layer_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix('.py')


def ikgat_imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith('ikgat.')):
            yield node.module.split('.')[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith('ikgat.'):
                    yield alias.name.split('.')[1]


def test_imports_flow_one_way():
    wrong = []
    for path in sorted(PACKAGE.rglob('*.py')):
        layer = layer_of(path)
        if layer not in LAYERS:
            continue
        for target in ikgat_imports(path):
            if target not in LAYERS[layer]:
                wrong.append(f'{path.relative_to(PACKAGE)} imports '
                             f'ikgat.{target}')
    assert not wrong, wrong
