"""The documentation reads as a reader's: every page has one title, no two
pages share one, no title or heading names an internal issue, a commit or a
run, the maintained pages name no machine path or removed command, the
changelog publishes no to-do list, every study is listed, scripts of past
runs sit in the archive, and the README stays short."""
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


# A commit name (seven or more hex digits with a digit and a letter), a
# numbered run or a recheck: the words of a lab notebook, not of a title.
NOTEBOOK = re.compile(r'\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b'
                      r'|\bruns? \d|\brecheck\b|\bat commit\b', re.I)
MACHINE_PATH = re.compile(r'(?<![\w.~$])/(work|home|root|Users)/')


def test_no_title_or_heading_names_a_commit_or_a_run():
    for relative, path in pages():
        for _, text in headings(expanded(path)):
            assert not NOTEBOOK.search(text), f'{relative}: {text!r}'


def test_the_maintained_pages_name_no_machine_path_or_removed_command():
    # The archive shows records as they were written; every other page,
    # with what it includes, says what holds today.
    for relative, path in pages():
        if relative.startswith(osp.join('benchmarks', 'archive')):
            continue
        text = expanded(path)
        assert not MACHINE_PATH.search(text), \
            f'{relative}: {MACHINE_PATH.search(text).group(0)}'
        assert 'ikgat bench' not in text, relative


def test_the_changelog_publishes_no_todo_list():
    with open(osp.join(ROOT, 'CHANGELOG.md')) as file:
        for _, text in headings(file.read()):
            assert not re.match(r'to ?do\b', text, re.I), text


def test_every_study_is_listed():
    studies = sorted(
        osp.basename(path)[:-3]
        for path in glob.glob(osp.join(ROOT, 'benchmarks', '*.py'))
        if not path.endswith('__init__.py'))
    with open(osp.join(ROOT, 'benchmarks', '__init__.py')) as file:
        package_doc = file.read()
    with open(osp.join(DOCS, 'benchmarks', 'index.md')) as file:
        index = file.read()
    assert [s for s in studies if f'benchmarks.{s}`' not in package_doc] == []
    assert [s for s in studies if f'`{s}`' not in index] == []


def test_scripts_of_past_runs_sit_in_the_archive():
    results = osp.join(ROOT, 'benchmarks', 'results')
    scripts = [osp.relpath(path, results) for path in
               glob.glob(osp.join(results, '**', '*'), recursive=True)
               if path.endswith(('.py', '.sh'))]
    assert scripts, 'no scripts found: has the archive moved?'
    outside = [path for path in scripts if not path.startswith('archive')]
    assert outside == [], outside
    assert osp.exists(osp.join(results, 'archive', 'README.md'))


def test_the_figures_page_cuts_its_include_at_the_wide_figure():
    # docs/benchmarks/figures.md shows the five-panel figure full width by
    # including the README around its image line.
    with open(osp.join(DOCS, 'benchmarks', 'figures.md')) as file:
        page = file.read()
    end = int(re.search(r':end-line: (\d+)', page).group(1))
    start = int(re.findall(r':start-line: (\d+)', page)[-1])
    with open(osp.join(ROOT, 'benchmarks', 'results', 'figures',
                       'README.md')) as file:
        lines = file.read().splitlines()
    assert lines[end:start] == ['![sparsity against p](sparsity_vs_p.png)']
