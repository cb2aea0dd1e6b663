"""``ikgat --help`` answers at once: neither the command line's parser nor
``import ikgat`` imports torch or PyG (issue 58); a sub-command imports its
own module only when it runs."""
import subprocess
import sys

HEAVY = ('torch', 'torch_geometric', 'numpy')


def _imported_after(code: str) -> list:
    script = (f'import sys\n{code}\n'
              f'print(",".join(m for m in {HEAVY!r} if m in sys.modules))')
    out = subprocess.run([sys.executable, '-c', script], check=True,
                         capture_output=True, text=True).stdout
    last = out.strip().splitlines()[-1] if out.strip() else ''
    return [name for name in last.split(',') if name in HEAVY]


def test_import_ikgat_imports_no_torch():
    assert _imported_after('import ikgat; ikgat.__version__') == []


def test_the_help_imports_no_torch():
    code = ('from ikgat.cli import main\n'
            'try:\n    main(["--help"])\nexcept SystemExit:\n    pass')
    assert _imported_after(code) == []


def test_the_layers_still_import_from_the_package():
    import ikgat
    from ikgat import IKGATConv
    from ikgat.nn import IKGATConv as nn_ikgat_conv
    assert IKGATConv is nn_ikgat_conv is ikgat.IKGATConv
    assert ikgat.kernels.KERNELS
    assert 'IKGATConv' in dir(ikgat)


def test_the_console_script_lists_every_command():
    result = subprocess.run([sys.executable, '-m', 'ikgat.cli', '--help'],
                            capture_output=True, text=True)
    assert result.returncode == 0
    for command in ('train', 'tune', 'plot'):
        assert command in result.stdout
