r"""``python -m ikgat.cli``: the ``ikgat`` command."""
from ikgat.cli.commands import main

main()
