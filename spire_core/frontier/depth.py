"""Where ``DepthLimit`` was first defined; it lives in ``spire_core.frontier.facades`` with every facade."""

from spire_core.frontier.facades import DepthLimit

__all__ = ["DepthLimit"]
