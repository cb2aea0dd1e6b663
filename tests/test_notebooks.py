"""Execute every notebook of ``notebooks/`` top to bottom in smoke mode
(``IKGAT_SMOKE=1``: a few epochs, few spectral points), so they never rot.

The kernel is a ``python3`` kernelspec written into a temporary
``JUPYTER_PATH`` that runs the interpreter running the tests, so the
notebooks see this environment's ikgat whatever kernels are installed
globally.  Needs nbclient, nbformat and ipykernel (the ``notebooks`` extra)
and the Cora raw files (``IKGAT_DATA``), else the tests are skipped.
"""
import glob
import json
import os
import os.path as osp
import sys
import time

import pytest

nbformat = pytest.importorskip('nbformat')
nbclient = pytest.importorskip('nbclient')
pytest.importorskip('ipykernel')
pytest.importorskip('matplotlib')
pytest.importorskip('sklearn')

pytestmark = pytest.mark.slow  # each notebook starts a kernel and trains

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
NOTEBOOK_DIR = osp.join(ROOT, 'notebooks')
NOTEBOOKS = sorted(glob.glob(osp.join(NOTEBOOK_DIR, '*.ipynb')))
# A hang guard per cell, not a timing check (timings belong in benchmarks):
CELL_TIMEOUT_SECONDS = 900


def test_the_four_notebooks_exist():
    names = [osp.basename(path) for path in NOTEBOOKS]
    assert names == ['01_quick_start.ipynb', '02_spectral_points.ipynb',
                     '03_sparsity_vs_p.ipynb',
                     '04_similarity_vs_magnitude.ipynb']


@pytest.mark.parametrize('path', NOTEBOOKS, ids=osp.basename)
def test_notebook_is_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == 'code':
            assert cell.outputs == [], f'{path}: clear the outputs'
            assert cell.execution_count is None, f'{path}: clear the outputs'


@pytest.fixture
def python3_kernel(tmp_path, monkeypatch):
    spec_dir = tmp_path / 'jupyter' / 'kernels' / 'python3'
    spec_dir.mkdir(parents=True)
    spec = dict(argv=[sys.executable, '-m', 'ipykernel_launcher', '-f',
                      '{connection_file}'], display_name='Python 3 (ikgat '
                'tests)', language='python')
    (spec_dir / 'kernel.json').write_text(json.dumps(spec))
    # JUPYTER_PATH comes first in the kernelspec search path.
    monkeypatch.setenv('JUPYTER_PATH', str(tmp_path / 'jupyter'))
    monkeypatch.setenv('IKGAT_SMOKE', '1')
    # One thread per kernel: CI runners and this project's shared machines.
    for name in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
        monkeypatch.setenv(name, os.environ.get(name, '1'))
    monkeypatch.setenv('MPLBACKEND', 'Agg')
    return 'python3'


@pytest.mark.parametrize('path', NOTEBOOKS, ids=osp.basename)
def test_notebook_runs_in_smoke_mode(path, python3_kernel, cora):
    # The cora fixture skips when the data is missing and sets IKGAT_DATA.
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, kernel_name=python3_kernel, timeout=CELL_TIMEOUT_SECONDS,
        resources={'metadata': {'path': NOTEBOOK_DIR}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError on the first failing cell
    seconds = time.perf_counter() - start
    print(f'{osp.basename(path)}: {seconds:.1f} s in smoke mode')
    errors = [output for cell in notebook.cells
              for output in cell.get('outputs', [])
              if output.get('output_type') == 'error']
    assert not errors
