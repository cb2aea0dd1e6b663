"""The import layers: ikgat/ never imports benchmarks/ or tests/, benchmarks/
never imports tests/, no module imports a private name of another top-level
package, there are no import cycles, and nothing edits sys.path."""
import ast
import os.path as osp
from pathlib import Path
from typing import Dict, List, Set

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ('ikgat', 'benchmarks')


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix('').parts)
    if parts[-1] == '__init__':
        parts.pop()
    return '.'.join(parts)


def modules() -> Dict[str, Path]:
    return {module_name(path): path for package in PACKAGES
            for path in sorted((ROOT / package).rglob('*.py'))}


def imports(path: Path, name: str) -> List[ast.AST]:
    return [node for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.Import, ast.ImportFrom))]


def imported(node: ast.AST, name: str, is_package: bool) -> List[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ''
    if node.level:  # relative import
        parts = name.split('.')
        if not is_package:
            parts = parts[:-1]
        parts = parts[:len(parts) - node.level + 1]
        base = '.'.join(parts + ([base] if base else []))
    return [base] + [f'{base}.{alias.name}' for alias in node.names]


def graph() -> Dict[str, Set[str]]:
    known = modules()
    edges: Dict[str, Set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for node in imports(path, name):
            for target in imported(node, name, path.name == '__init__.py'):
                if target in known and target != name:
                    edges[name].add(target)
    return edges


def test_imports_flow_one_way():
    wrong = []
    for name, path in modules().items():
        for node in imports(path, name):
            for target in imported(node, name, path.name == '__init__.py'):
                top = target.split('.')[0]
                if top == 'tests' or (name.startswith('ikgat')
                                      and top == 'benchmarks'):
                    wrong.append(f'{name} imports {target}')
    assert wrong == []


def test_no_private_names_across_packages():
    wrong = []
    for name, path in modules().items():
        for node in imports(path, name):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module.split('.')[0] != name.split('.')[0]):
                wrong += [f'{name} imports {node.module}.{alias.name}'
                          for alias in node.names
                          if alias.name.startswith('_')]
    assert wrong == []


def test_no_import_cycles():
    # Tarjan's strongly connected components: a cycle is one of size > 1.
    edges = graph()
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    cycles: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    # A package's __init__ importing its own submodules is not a cycle of
    # the layers; drop packages from the components before judging:
    packages = {name for name, path in modules().items()
                if path.name == '__init__.py'}
    cycles = [[m for m in c if m not in packages] for c in cycles]
    assert [c for c in cycles if len(c) > 1] == []


def test_nothing_edits_sys_path():
    sources = [path for package in PACKAGES + ('tests', )
               for path in (ROOT / package).rglob('*.py')
               if path != Path(__file__).resolve()]
    assert [osp.relpath(path, ROOT) for path in sources
            if 'sys.path' in path.read_text()] == []
