"""Real disk conditions for tests: a small tmpfs that fills up, a folder mounted read-only (needs root, as CI runs)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["fill", "read_only", "remount_read_only", "small_disk", "writable_until_remounted"]


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=True, capture_output=True)


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs or a read-only folder needs root (CI runs as root)")


@contextlib.contextmanager
def small_disk(path: Path, size: str = "64k") -> Iterator[Path]:
    """``path`` (created) as a tmpfs of ``size`` for the duration."""
    _need_root()
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    try:
        yield path
    finally:
        _umount(path)


def fill(disk: Path, *, leave: int = 0) -> None:
    """Fill ``disk`` until a write fails for lack of space, then free ``leave`` bytes again (roughly: a page)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * 4096):
                pass
    finally:
        os.close(fd)
    if leave:
        size = filler.stat().st_size
        os.truncate(filler, max(0, size - leave))


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` (created) bind-mounted read-only over itself for the duration: root cannot write it either."""
    _need_root()
    path.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(path), str(path))
    try:
        _mount("-o", "remount,bind,ro", str(path))
        yield path
    finally:
        _umount(path)


@contextlib.contextmanager
def writable_until_remounted(path: Path) -> Iterator[Path]:
    """``path`` bind-mounted writable; ``remount_read_only(path)`` makes it read-only mid-test (a disk going bad)."""
    _need_root()
    path.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(path), str(path))
    try:
        yield path
    finally:
        _umount(path)


def remount_read_only(path: Path) -> None:
    """Turn a mount from ``writable_until_remounted`` read-only, as the kernel does to a failing disk."""
    _mount("-o", "remount,bind,ro", str(path))
