"""The ``toolkeeper`` command line."""
from .cli.entry import main

main()
