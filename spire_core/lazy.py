"""Names a package exports but imports on first use, so that ``import spire`` stays fast.

A package lists the heavy names it exports and the module each comes from; the first
``package.Name`` (or ``from package import Name``) imports that module and keeps the value:

    if typing.TYPE_CHECKING:  # mypy sees the real imports
        from spire_core.frontier.sqlite import SqliteFrontier
    else:
        __getattr__, __dir__ = lazy.exports(__name__, {"SqliteFrontier": "spire_core.frontier.sqlite"})

``dir(package)`` lists the lazy names before they are imported.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["exports"]


def exports(package: str, sources: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: each name in ``sources`` comes from its module."""
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> object:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value  # imported once: later lookups never reach this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *sources})

    return __getattr__, __dir__
