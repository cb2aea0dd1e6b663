import os
import os.path as osp

import pytest
import torch

# Without a GPU, Triton kernels run in Triton's interpreter.  Triton reads the
# variable when it is first imported, which PyG may do while any test module
# is collected, so it is set here, before collection:
if not torch.cuda.is_available():
    os.environ.setdefault('TRITON_INTERPRET', '1')


def _patch_the_interpreter_once_per_kernel():
    r"""Triton's interpreter patches :mod:`triton.language` at each kernel
    launch, and again at every call of a jitted helper inside the kernel
    (five ``inspect.getmembers`` scans, about 0.2 ms, repeated per edge
    tile); the kernels' shared steps made those calls most of the
    interpreter tests' time.  A helper whose language modules are already
    patched (their builtins replaced, so ``tl.arange`` is no longer one)
    skips the repeat; the launch's own patching and restoring stay as they
    are."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return
    patch_lang = getattr(interpreter, '_patch_lang', None)
    scope = getattr(interpreter, '_LangPatchScope', None)
    if patch_lang is None or scope is None:
        return
    tl = interpreter.tl

    def patched(lang):
        return not tl.core.is_builtin(getattr(lang, 'arange', None))

    def patch_unless_patched(fn):
        langs = [value for value in fn.__globals__.values()
                 if value is tl or value is tl.core]
        if langs and all(patched(lang) for lang in langs):
            return scope()
        return patch_lang(fn)

    interpreter._patch_lang = patch_unless_patched


if os.environ.get('TRITON_INTERPRET') == '1':
    _patch_the_interpreter_once_per_kernel()

# A worker of pytest-xdist (`pytest -n 2`, the README's test command) runs on
# one thread: two processes of several threads each on two cores thrash.
if os.environ.get('PYTEST_XDIST_WORKER'):
    torch.set_num_threads(1)

SHARED_DATA = osp.join(osp.dirname(__file__), '..', '..', 'shared', 'data')


def pytest_configure(config):
    # Tests read the Planetoid files from IKGAT_DATA, or from ../shared/data
    # beside the checkout when it exists.
    if not os.environ.get('IKGAT_DATA') and osp.isdir(SHARED_DATA):
        os.environ['IKGAT_DATA'] = osp.abspath(SHARED_DATA)


@pytest.fixture(scope='session')
def cora():
    import torch_geometric.transforms as T

    from ikgat.data import load_planetoid
    try:
        dataset = load_planetoid('Cora', transform=T.NormalizeFeatures())
    except RuntimeError as error:
        pytest.skip(f'Cora is not available: {error}')
    return dataset


# ---------------------------------------------------------------------------
# CI installs every optional part (data, the sampler, torch-sparse, Triton,
# captum, ...): there a skip would hide coverage, so with
# IKGAT_REQUIRE_OPTIONAL=1 (set by .ci/run) every skip fails, but those of
# parts no CPU machine has (CUDA).

#: Skip reasons that stand on CI's machine (no GPU): substrings.
SKIPS_WITHOUT_A_GPU = ('CUDA', 'a GPU is here', 'KEPGATConv has no p')


def _requires_optional() -> bool:
    return os.environ.get('IKGAT_REQUIRE_OPTIONAL') == '1'


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _fail_a_hidden_skip(report) -> None:
    reason = _skip_reason(report)
    if any(allowed in reason for allowed in SKIPS_WITHOUT_A_GPU):
        return
    report.outcome = 'failed'
    report.longrepr = (f'skipped where IKGAT_REQUIRE_OPTIONAL=1 (CI) wants '
                       f'it to run: {reason}; install what it needs')


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (_requires_optional() and report.skipped
            and not hasattr(report, 'wasxfail')):
        _fail_a_hidden_skip(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if _requires_optional() and report.skipped:
        _fail_a_hidden_skip(report)
