"""The ``-o`` rules in the command's words: an existing file is refused unless ``--append``."""

from __future__ import annotations

from pathlib import Path

from spire_core.dataset.output import check_output
from spire_core.errors import ConfigError

__all__ = ["check_option"]


def check_option(path: str, *, append: bool) -> None:
    """Raise ``ConfigError`` (naming ``--append``) unless ``-o path`` may be written."""
    if path == "-":
        return
    if Path(path).exists() and not append:
        raise ConfigError(f"{path} already exists: --append adds to it (spire never overwrites an output file)")
    check_output(path, append=append)
