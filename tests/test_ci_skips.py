"""With IKGAT_REQUIRE_OPTIONAL=1 (set by .ci/run) a skip for want of an
optional part fails (tests/conftest.py), a skip for want of CUDA stays a
skip; without it every skip stays one."""
import types

import pytest

from tests import conftest


def report(reason):
    return types.SimpleNamespace(outcome='skipped',
                                 longrepr=('test_x.py', 3, reason))


@pytest.mark.parametrize('reason, fails', [
    ('Skipped: needs pyg-lib or torch-sparse', True),
    ('Skipped: needs torch-sparse', True),
    ('Skipped: the Planetoid raw files are not available', True),
    ("could not import 'captum': No module named 'captum'", True),
    ('Skipped: CUDA not available', False),
    ('Skipped: needs CUDA', False),
])
def test_a_hidden_skip_fails_where_optional_parts_are_required(reason, fails):
    skipped = report(reason)
    conftest._fail_a_hidden_skip(skipped)
    assert skipped.outcome == ('failed' if fails else 'skipped')
    if fails:
        assert 'IKGAT_REQUIRE_OPTIONAL=1' in skipped.longrepr
        assert reason in skipped.longrepr


def test_the_flag_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv('IKGAT_REQUIRE_OPTIONAL', raising=False)
    assert not conftest._requires_optional()
    monkeypatch.setenv('IKGAT_REQUIRE_OPTIONAL', '1')
    assert conftest._requires_optional()
