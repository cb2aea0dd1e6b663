r"""Sphinx extension of the ikgat documentation: pages generated at build time.

- ``docs/api/``: one page per module of the installed package, found by
  walking :mod:`pkgutil` over ``ikgat.__path__`` (a new module gets its page
  without editing the documentation), and an index that opens with what
  users import (read from the packages' ``__all__`` at build time, so that
  a moved name stays listed) and then lists the modules by package, the
  modules that define something users import before the helpers.
- A module's page documents what users import from it first, then the
  rest in source order; a class's bases name public classes only (an
  internal base or mixin is replaced by its own public bases).
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

#: The packages whose ``__all__`` says what users import, and the index's
#: headings for them: the layers, the kernels, then the functions of
#: :mod:`ikgat.nn` and of :mod:`ikgat.ops` that are not layers.
IMPORTED: List[Tuple[str, str]] = [
    ('Layers', 'ikgat'),
    ('Kernels', 'ikgat.kernels'),
    ('Functions and helpers of ikgat.nn', 'ikgat.nn'),
    ('Operators (ikgat.ops)', 'ikgat.ops'),
]

#: The index's module sections: the first whose rule matches a module takes
#: it; modules that match none are listed under 'Other modules', so nothing
#: new is ever left out.
#: The application's packages, each a section of the index.
APPLICATION: List[Tuple[str, str]] = [
    ('Data: ikgat.data', 'ikgat.data'),
    ('Training and tuning: ikgat.training', 'ikgat.training'),
    ('Inspection and figures: ikgat.inspection', 'ikgat.inspection'),
    ('Metrics: ikgat.metrics', 'ikgat.metrics'),
    ('The command line: ikgat.cli', 'ikgat.cli'),
]
_PACKAGES = {'ikgat.kernels', 'ikgat.nn', 'ikgat.ops'} | {
    package for _, package in APPLICATION}


def _in_package(package: str) -> Callable[[str], bool]:
    return lambda name: name == package or name.startswith(package + '.')


GROUPS: List[Tuple[str, Callable[[str], bool]]] = [
    ('The package, its models and shared helpers',
     lambda name: name.count('.') <= 1 and name not in _PACKAGES),
    *[(title, _in_package(package)) for title, package in APPLICATION],
    ('Layers: ikgat.nn.conv', lambda name: name.startswith('ikgat.nn.conv')),
    ('Kernels: ikgat.kernels', lambda name: name.startswith('ikgat.kernels')),
    ('Operators: ikgat.ops', lambda name: name.startswith('ikgat.ops')),
    ('Functions, norms and losses: ikgat.nn',
     lambda name: name.startswith('ikgat.nn')),
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


def _summary(obj) -> str:
    r"""The first sentence of an object's docstring, on one line."""
    doc = inspect.getdoc(obj) or ''
    paragraph = _first_paragraph(doc) if doc.strip() else ''
    end = paragraph.find('. ')
    return paragraph if end < 0 else paragraph[:end + 1]


def imported_names() -> List[Tuple[str, List[Tuple[str, str, str]]]]:
    r"""What users import, by package: for each of :data:`IMPORTED`, the
    classes and functions of its ``__all__`` as (import path, documented
    home, one-line summary), each name listed once (the layers that
    :mod:`ikgat.nn` re-exports stay under 'Layers')."""
    seen = set()
    sections = []
    for title, package_name in IMPORTED:
        package = importlib.import_module(package_name)
        rows = []
        for name in getattr(package, '__all__', []):
            obj = getattr(package, name, None)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            home = f'{obj.__module__}.{obj.__qualname__}'
            if home in seen:
                continue
            seen.add(home)
            rows.append((f'{package_name}.{name}', home, _summary(obj)))
        if rows:
            sections.append((title, rows))
    return sections


def _exported_homes() -> Dict[str, List[str]]:
    r"""For each module, the names it defines that users import, in the
    order of the packages' ``__all__``."""
    homes: Dict[str, List[str]] = {}
    for _, rows in imported_names():
        for _, home, _ in rows:
            module, _, name = home.rpartition('.')
            homes.setdefault(module, []).append(name)
    return homes


def _reference_table(rows: List[Tuple[str, str, str]]) -> List[str]:
    table = ['.. list-table::', '   :class: api-summary', '   :widths: 35 65',
             '']
    for path, home, summary in rows:
        table += [f'   * - :py:obj:`{path} <{home}>`',
                  f'     - {summary or "—"}']
    return table + ['']


def write_api_pages(app) -> None:
    api = os.path.join(DOCS, 'api')
    modules = public_modules()
    exported = _exported_homes()
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
             'What you import, with the first sentence of its documentation; '
             'every name links to its page. The tables are read from the '
             'packages\' ``__all__`` and the pages generated by walking '
             '``ikgat.__path__`` at build time (``docs/_ext/ikgat_docs.py``).',
             '']
    for title, rows in imported_names():
        index += [title, '-' * len(title), ''] + _reference_table(rows)
    index += ['Modules', '-------', '',
              'Every public module, by package: in each, the modules that '
              'define what users import come first, then the helpers.', '']
    for title, names in grouped.items():
        if not names:
            continue
        # Packages and the modules users import from first, helpers after;
        # each part in the order the walk found them.
        first = [n for n in names
                 if n in exported or n.count('.') <= 1 or
                 hasattr(importlib.import_module(n), '__path__')]
        helpers = [n for n in names if n not in first]
        index += [title, '~' * len(title), '']
        for caption, part in (('', first), ('Helpers', helpers)):
            if not part:
                continue
            if caption:
                index += [f'*{caption}:*', '']
            index += ['.. toctree::', '   :maxdepth: 1', '']
            index += [f'   {name}' for name in part] + ['']
    _write_if_changed(os.path.join(api, 'index.rst'), '\n'.join(index))


def write_cli_help(app) -> None:
    for args in (['train'], ['tune'], ['plot']):
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


_EXPORTED: Dict[str, List[str]] = {}


def _exported_in(module: str) -> List[str]:
    if not _EXPORTED:
        _EXPORTED.update(_exported_homes())
    return _EXPORTED.get(module, [])


def _public_bases(app, name, obj, options, bases):
    # An internal base or mixin of ikgat (a class that no package's __all__
    # lists) is replaced by its own bases, down to public classes: the page
    # of IKGATConv names MessagePassing, not the helpers it is built from.
    _exported_in('ikgat')
    public = {f'{module}.{name}' for module, names in _EXPORTED.items()
              for name in names}

    def expand(cls) -> list:
        home = f'{cls.__module__}.{cls.__qualname__}'
        if not cls.__module__.startswith('ikgat') or home in public:
            return [cls]
        return [found for base in cls.__bases__ for found in expand(base)]

    kept: list = []
    for base in bases:
        for cls in expand(base) if inspect.isclass(base) else [base]:
            if cls is not object and cls not in kept:
                kept.append(cls)
    bases[:] = kept


def _exported_first_in_modules() -> None:
    # A module's page starts with what users import from it (a layer, a
    # kernel), then the rest in source order with the classes and functions
    # before module constants. Sphinx 9's autodoc sorts members in one
    # function; it is wrapped here (a newer Sphinx without it keeps plain
    # source order).
    try:
        from sphinx.ext.autodoc._dynamic import _member_finder as finder
        original = finder._sort_members
    except (ImportError, AttributeError):
        return
    if getattr(original, 'ikgat_wrapped', False):
        return

    def sort_members(documenters, order, **kwargs):
        documenters = original(documenters, order, **kwargs)
        props = kwargs.get('props')
        if getattr(props, 'obj_type', None) != 'module':
            return documenters
        exported = _exported_in(props.module_name)

        def key(entry):
            member = entry[0]
            name = member.dotted_parts
            if name in exported:
                return (0, exported.index(name))
            return (1, 0 if member._groupwise_order_key < 40 else 1)

        return sorted(documenters, key=key)

    sort_members.ikgat_wrapped = True
    finder._sort_members = sort_members


def setup(app):
    _exported_first_in_modules()
    app.connect('autodoc-process-bases', _public_bases)
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
