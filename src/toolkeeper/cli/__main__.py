"""``python -m toolkeeper.cli``: the ``toolkeeper`` command."""

from .main import main

main()
