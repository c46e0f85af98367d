"""Workspaces the sandbox user can reach (see ``tests/workspaces.py``)."""

from ..workspaces import reachable, ws

__all__ = ["reachable", "ws"]
