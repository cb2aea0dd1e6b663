"""The documentation reads as a reader's: every page has one title, no two
pages share one, no title or heading names an internal issue number, and
the README stays short."""
import glob
import os.path as osp
import re

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DOCS = osp.join(ROOT, 'docs')
INCLUDE = re.compile(r'^```\{include\} (\S+)\n((?::[\w-]+:.*\n)*)```$', re.M)
ISSUE = re.compile(r'\bissues?\s*#?\s*\d', re.I)


def pages():
    for path in sorted(glob.glob(osp.join(DOCS, '**', '*.md'),
                                 recursive=True)):
        relative = osp.relpath(path, DOCS)
        if not relative.startswith(('_build', '_generated', 'api')):
            yield relative, path


def expanded(path: str) -> str:
    r"""The page's Markdown with its ``{include}`` directives replaced by
    the lines they include (``start-line`` and ``end-line`` applied)."""
    with open(path) as file:
        text = file.read()

    def include(match) -> str:
        options = dict(re.findall(r':([\w-]+):[ \t]*(.*)', match.group(2)))
        target = osp.join(osp.dirname(path), match.group(1))
        with open(target) as file:
            lines = file.read().splitlines()
        start = int(options.get('start-line', 0))
        end = int(options['end-line']) if 'end-line' in options else None
        return '\n'.join(lines[start:end])

    return INCLUDE.sub(include, text)


def headings(text: str):
    r"""The Markdown headings outside code blocks, as (level, text)."""
    fenced = False
    for line in text.splitlines():
        if line.startswith('```'):
            fenced = not fenced
        elif not fenced:
            match = re.match(r'(#{1,6}) (.*)', line)
            if match:
                yield len(match.group(1)), match.group(2).strip()


def test_every_page_has_one_title_and_no_two_share_one():
    titles = {}
    for relative, path in pages():
        found = [text for level, text in headings(expanded(path))
                 if level == 1]
        assert len(found) == 1, f'{relative}: titles {found}'
        titles.setdefault(found[0], []).append(relative)
    shared = {title: where for title, where in titles.items()
              if len(where) > 1}
    assert not shared, f'pages sharing a title: {shared}'


def test_no_title_or_heading_names_an_internal_issue():
    for relative, path in pages():
        for _, text in headings(expanded(path)):
            assert not ISSUE.search(text), f'{relative}: {text!r}'
    with open(osp.join(ROOT, 'README.md')) as file:
        for _, text in headings(file.read()):
            assert not ISSUE.search(text), f'README.md: {text!r}'


def test_the_checker_sees_a_shared_title(tmp_path):
    for name in ('a', 'b'):
        (tmp_path / f'{name}.md').write_text('# Speed and memory\n\ntext\n')
    found = [next(headings(expanded(str(tmp_path / f'{name}.md'))))
             for name in ('a', 'b')]
    assert found[0] == found[1] == (1, 'Speed and memory')


def test_the_readme_is_short_and_shows_the_figure():
    with open(osp.join(ROOT, 'README.md')) as file:
        text = file.read()
    assert len(text) < 8000
    assert ('](benchmarks/results/figures/spectral_tsne.png)]'
            '(docs/benchmarks/figures.md)') in text
