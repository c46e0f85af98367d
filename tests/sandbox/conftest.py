"""Workspaces the sandbox user can reach (see ``tests/workspaces.py``)."""

from ..workspaces import reachable

__all__ = ["reachable"]
