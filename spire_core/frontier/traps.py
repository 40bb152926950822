"""Where ``AvoidTraps`` was first defined; it lives in ``spire_core.frontier.facades`` with every facade."""

from spire_core.frontier.facades import AvoidTraps, path_prefix

__all__ = ["AvoidTraps", "path_prefix"]
