"""Frontiers: where seeds wait. Stores, and facades that add behaviour on top of any store."""

from spire_core.frontier.base import Composable, Frontier, FrontierOps, Lease, PushResult, Ready, Wait, always_ready
from spire_core.frontier.dedup import Dedup
from spire_core.frontier.depth import DepthLimit
from spire_core.frontier.facade import Facade
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.retry import Retrying
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.frontier.tags import TagControl
from spire_core.frontier.traps import AvoidTraps

__all__ = [
    "AvoidTraps",
    "Composable",
    "Dedup",
    "DepthLimit",
    "Facade",
    "Frontier",
    "FrontierOps",
    "Lease",
    "MemoryFrontier",
    "PushResult",
    "Ready",
    "Retrying",
    "SqliteFrontier",
    "TagControl",
    "Wait",
    "always_ready",
]
