r"""Sphinx extension of the ikgat documentation: pages generated at build time.

- ``docs/api/``: one page per module of the installed package, found by
  walking :mod:`pkgutil` over ``ikgat.__path__`` (a new module gets its page
  without editing the documentation), and an index grouping them.
- ``kernel-table``: a directive that renders :data:`ikgat.kernels.KERNELS`,
  the registry ``IKGATConv(kernel=...)`` resolves names with.
- ``docs/_generated/cli_*.txt``: the command line's ``--help`` texts.
- A resolver for short references to ikgat's own objects (``:class:`Kernel```
  in a docstring of :mod:`ikgat.kernels`): a reference that names one
  documented ikgat object, by its import path or by a unique dotted suffix,
  links to it; anything else stays unresolved and fails the nitpicky build.
"""
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
import textwrap
from typing import Callable, Dict, List, Tuple

from docutils.parsers.rst import Parser as RstParser
from docutils.utils import new_document
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

import ikgat

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.dirname(HERE)

#: The API index's sections: the first whose rule matches a module takes it;
#: modules that match none are listed under 'Other modules', so nothing new
#: is ever left out.
GROUPS: List[Tuple[str, Callable[[str], bool]]] = [
    ('Package', lambda name: name == 'ikgat'),
    ('Layers', lambda name: name.startswith('ikgat.nn.conv')),
    ('Kernels', lambda name: name.startswith('ikgat.kernels')),
    ('Functional operators, norms and losses',
     lambda name: name.startswith('ikgat.nn')),
    ('Training, models and data', lambda name: name in {
        'ikgat.training', 'ikgat.models', 'ikgat.datasets',
        'ikgat.checkpoints', 'ikgat.durable', 'ikgat.metrics'}),
    ('Mini-batches and many processes', lambda name: name in {
        'ikgat.sampling', 'ikgat.distributed'}),
    ('Inspection, visualization and references', lambda name: name in {
        'ikgat.inspection', 'ikgat.visualization', 'ikgat.reference'}),
    ('Command line', lambda name: name == 'ikgat.cli'),
]


def public_modules() -> List[str]:
    r"""Every module of the package whose dotted name has no part starting
    with an underscore, the package itself first."""
    names = ['ikgat']
    for info in pkgutil.walk_packages(ikgat.__path__, 'ikgat.'):
        if not any(part.startswith('_') for part in info.name.split('.')):
            names.append(info.name)
    return names


def _write_if_changed(path: str, text: str) -> None:
    # Unchanged pages keep their time stamps, so that a second builder (the
    # doctest run after the HTML run) reuses the environment.
    if os.path.exists(path):
        with open(path, encoding='utf-8') as f:
            if f.read() == text:
                return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)


def _public_names(module) -> List[str]:
    lines = []
    for name in getattr(module, '__all__', []):
        obj = getattr(module, name, None)
        home = getattr(obj, '__module__', None)
        if home is None or not (inspect.isclass(obj) or inspect.isfunction(obj)
                                or inspect.ismodule(obj)):
            continue
        if inspect.ismodule(obj):
            lines.append(f'- :py:mod:`{module.__name__}.{name} '
                         f'<{obj.__name__}>`')
        elif home != module.__name__:
            lines.append(f'- :py:obj:`{module.__name__}.{name} '
                         f'<{home}.{obj.__qualname__}>`')
    return lines


def module_page(name: str) -> str:
    module = importlib.import_module(name)
    title = f'``{name}``'
    text = [title, '=' * len(title), '', f'.. automodule:: {name}', '']
    exported = _public_names(module)
    if exported:
        text += ['Importable from here (documented on their own pages):', '']
        text += exported + ['']
    return '\n'.join(text)


def write_api_pages(app) -> None:
    api = os.path.join(DOCS, 'api')
    modules = public_modules()
    grouped: Dict[str, List[str]] = {title: [] for title, _ in GROUPS}
    grouped['Other modules'] = []
    for name in modules:
        title = next((t for t, rule in GROUPS if rule(name)), 'Other modules')
        grouped[title].append(name)
        _write_if_changed(os.path.join(api, f'{name}.rst'), module_page(name))
    # Pages of modules that no longer exist go away.
    for file in os.listdir(api):
        if file.endswith('.rst') and file != 'index.rst' and \
                file[:-4] not in modules:
            os.remove(os.path.join(api, file))
    index = ['API reference', '=============', '',
             'Every public module of the package, generated at build time '
             'by walking ``ikgat.__path__`` (``docs/_ext/ikgat_docs.py``). '
             'The layers are importable as ``from ikgat import IKGATConv``.',
             '']
    for title, names in grouped.items():
        if not names:
            continue
        index += [title, '-' * len(title), '', '.. toctree::',
                  '   :maxdepth: 1', '']
        index += [f'   {name}' for name in names] + ['']
    _write_if_changed(os.path.join(api, 'index.rst'), '\n'.join(index))


def write_cli_help(app) -> None:
    for args in (['train'], ['plot']):
        out = subprocess.run(
            [sys.executable, '-m', 'ikgat.cli', *args, '--help'],
            capture_output=True, text=True, check=True,
            env=dict(os.environ, COLUMNS='79'))
        _write_if_changed(
            os.path.join(DOCS, '_generated', f'cli_{args[0]}.txt'),
            out.stdout)


def _first_paragraph(doc: str) -> str:
    return ' '.join(line.strip() for line in
                    doc.strip().split('\n\n')[0].splitlines())


def _first_math(doc: str) -> List[str]:
    lines = textwrap.dedent('\n'.join(doc.splitlines()[1:])).splitlines()
    for i, line in enumerate(lines):
        if line.strip() == '.. math::':
            block = []
            for follow in lines[i + 1:]:
                if follow.strip() and not follow.startswith(' '):
                    break
                block.append(follow.strip())
            return [line for line in block if line]
    return []


class KernelTable(SphinxDirective):
    r"""``.. kernel-table::``: the kernels of :data:`ikgat.kernels.KERNELS`,
    with what they compute, their declared capabilities and whether they
    pair two vectors (:attr:`~ikgat.kernels.base.Kernel.pairs_vectors`, the
    kernels of :func:`ikgat.kernels.vector_kernels` that
    :class:`ikgat.IKTransformerConv` takes), then each kernel's formula
    below the table (display formulas would widen its column past the
    page's).  The generated markup is reStructuredText, parsed as such on
    any page, a MyST Markdown one included (whose own parser would leave
    it as text)."""
    has_content = False

    def run(self):
        from ikgat.kernels import KERNELS

        flags = ['uses_magnitude', 'has_spectral_points', 'can_redraw',
                 'has_kl', 'stochastic']
        rst = ['.. list-table::', '   :header-rows: 1',
               '   :widths: 10 20 38 22 10', '',
               '   * - ``kernel=``', '     - class',
               '     - what it computes', '     - declares',
               '     - pairs two vectors (IKTransformerConv)']
        formulas = []
        for name, cls in KERNELS.items():
            doc = inspect.getdoc(cls) or ''
            rst += [f'   * - ``{name!r}``',
                    f'     - :class:`~{cls.__module__}.{cls.__qualname__}`',
                    f'     - {_first_paragraph(doc)}']
            math = _first_math(doc)
            if math:
                formulas += [f'``{name!r}``', '   .. math::', '']
                formulas += [f'      {line}' for line in math] + ['']
            declared = [f'``{flag}``' for flag in flags
                        if getattr(cls, flag)]
            rst.append(f"     - {', '.join(declared) or '—'}")
            rst.append(f"     - {'yes' if cls.pairs_vectors else '—'}")
        rst += ['', 'The formulas:', ''] + formulas
        # Parsed by docutils' reStructuredText parser into a document of its
        # own, which shares this one's settings (and so Sphinx's roles and
        # environment: the cross-references resolve as on any page).
        document = new_document('kernel-table', self.state.document.settings)
        RstParser().parse('\n'.join(rst), document)
        return document.children


def _home(obj) -> str:
    function = obj.fget if isinstance(obj, property) else obj
    module = getattr(function, '__module__', None)
    qualname = getattr(function, '__qualname__', None)
    if isinstance(module, str) and isinstance(qualname, str):
        return f'{module}.{qualname}'
    return ''


def _homes_of_path(path: str) -> List[str]:
    r"""Where the object named by the import path :obj:`path` is documented:
    its defining module and qualified name (a re-export, a method inherited
    from a base class), or for a plain class attribute its owner's home plus
    the attribute's name."""
    parts = path.split('.')
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module('.'.join(parts[:cut]))
        except ImportError:
            continue
        parent = None
        try:
            for attr in parts[cut:]:
                parent = obj
                obj = inspect.getattr_static(obj, attr) \
                    if inspect.isclass(obj) else getattr(obj, attr)
        except AttributeError:
            return []
        homes = [_home(obj)]
        if parent is not None and inspect.isclass(parent):
            # The attribute as documented on the class that defines it.
            owner = next((base for base in parent.__mro__
                          if parts[-1] in vars(base)), parent)
            homes.append(f'{_home(owner)}.{parts[-1]}')
        return [home for home in homes if home]
    return []


def resolve_ikgat_reference(app, env, node, contnode):
    if node.get('refdomain') != 'py':
        return None
    target = node['reftarget'].lstrip('.~')
    objects = env.get_domain('py').objects
    module = node.get('py:module') or ''
    context = node.get('py:class') or ''
    # The name as Python would resolve it: an import path (a re-export such
    # as ikgat.IKGATConv.forward), or a name in the current class or module.
    paths = [target]
    if module.startswith('ikgat'):
        if context:
            paths.append(f'{module}.{context}.{target}')
        paths.append(f'{module}.{target}')
    for path in paths:
        if not path.startswith('ikgat'):
            continue
        found = next((home for home in _homes_of_path(path)
                      if home in objects), None)
        if found is not None:
            break
    else:
        # A unique dotted suffix among ikgat's documented objects.
        candidates = [name for name in objects if name.startswith('ikgat.')
                      and name.endswith('.' + target)]
        if len(candidates) != 1:
            return None
        found = candidates[0]
    entry = objects[found]
    return make_refnode(app.builder, node['refdoc'], entry.docname,
                        entry.node_id, contnode, found)


_SENTENCES: Dict[str, List[str]] = {}


def _keep_attribute_sentence(app, what, name, obj, options, lines):
    # Napoleon reads the first line of an attribute's docstring as
    # 'type: description'; ikgat's attribute comments are sentences ("Elements
    # of one chunk's buffer (float32: 4 MiB) ..."), which it would cut at the
    # colon. Such a docstring (words with spaces before its first colon) is
    # kept before napoleon runs and put back after it.
    if what in ('attribute', 'data', 'property') and lines:
        head = lines[0].split(':', 1)
        if len(head) == 2 and ' ' in head[0].strip():
            _SENTENCES[name] = list(lines)


def _restore_attribute_sentence(app, what, name, obj, options, lines):
    if name in _SENTENCES:
        lines[:] = _SENTENCES.pop(name)


def setup(app):
    app.connect('builder-inited', write_api_pages)
    app.connect('builder-inited', write_cli_help)
    app.connect('missing-reference', resolve_ikgat_reference)
    # Around napoleon's handler (priority 500).
    app.connect('autodoc-process-docstring', _keep_attribute_sentence,
                priority=400)
    app.connect('autodoc-process-docstring', _restore_attribute_sentence,
                priority=600)
    app.add_directive('kernel-table', KernelTable)
    return {'version': '1', 'parallel_read_safe': True,
            'parallel_write_safe': True}
