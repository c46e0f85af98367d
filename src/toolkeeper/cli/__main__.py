"""``python -m toolkeeper.cli``: the ``toolkeeper`` command."""

from .entry import main

main()
