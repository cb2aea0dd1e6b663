r"""``python -m ikgat.cli``: the ``ikgat`` command."""
from ikgat.cli.main import main

main()
