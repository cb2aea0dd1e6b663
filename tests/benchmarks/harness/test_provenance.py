"""The commit recorded with benchmark results."""
from benchmarks.harness import provenance


def test_git_commit_can_be_named_by_the_environment(monkeypatch):
    monkeypatch.setattr(provenance, '_GIT_COMMIT', None)
    monkeypatch.setenv('IKGAT_GIT_COMMIT', 'abc123def456')
    assert provenance.git_commit() == 'abc123def456'
    monkeypatch.setattr(provenance, '_GIT_COMMIT', None)
    monkeypatch.delenv('IKGAT_GIT_COMMIT')
    assert provenance.git_commit() != 'abc123def456'
