"""The ``toolkeeper`` command line."""
