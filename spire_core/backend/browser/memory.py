"""How much memory a browser uses: the resident set of its process tree, read from ``/proc``.

chromedriver starts Chromium, which starts a renderer per site, a GPU and a network process, so a
driver's cost is the sum over every process below chromedriver. On a system without ``/proc`` the
size is unknown (``None``), and recycling by memory is off.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

__all__ = ["tree_pids", "tree_rss"]

_PROC = Path("/proc")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # ended while we looked
        # The command name sits in parentheses and may hold spaces; the parent pid follows the state.
        fields = stat.rsplit(")", 1)[-1].split()
        children[int(fields[1])].append(int(entry.name))
    return children


def _rss(pid: int) -> int:
    try:
        resident = (_PROC / str(pid) / "statm").read_text().split()[1]
    except (OSError, IndexError):
        return 0
    return int(resident) * _PAGE


def tree_pids(pid: int) -> list[int]:
    """Blocking: ``pid`` and every process below it (just ``pid`` without ``/proc``)."""
    if not _PROC.is_dir():
        return [pid]
    children = _children()
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        if current in found:
            continue
        found.append(current)
        pending.extend(children.get(current, ()))
    return found


def tree_rss(pid: int) -> int | None:
    """Blocking: bytes resident in process ``pid`` and every process below it; ``None`` without ``/proc``."""
    if not (_PROC / "self" / "statm").exists():
        return None
    return sum(_rss(current) for current in tree_pids(pid))
