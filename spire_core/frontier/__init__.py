"""Frontiers: where seeds wait. Stores, and facades that add behaviour on top of any store.

``SqliteFrontier`` (and sqlite3 under it) is imported on first use.
"""

import typing as _typing

from spire_core import lazy as _lazy
from spire_core.frontier.base import Composable, Frontier, Lease, PushResult, Ready, Wait, always_ready
from spire_core.frontier.bloom import Bloom
from spire_core.frontier.facades import AvoidTraps, Dedup, DepthLimit, Facade, FrontierOps, Retrying, TagControl
from spire_core.frontier.items import ItemStore
from spire_core.frontier.memory import MemoryFrontier

if _typing.TYPE_CHECKING:
    from spire_core.frontier.sqlite import SqliteFrontier
else:
    __getattr__, __dir__ = _lazy.exports(__name__, {"SqliteFrontier": "spire_core.frontier.sqlite"})

__all__ = [
    "AvoidTraps",
    "Bloom",
    "Composable",
    "Dedup",
    "DepthLimit",
    "Facade",
    "Frontier",
    "FrontierOps",
    "ItemStore",
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
