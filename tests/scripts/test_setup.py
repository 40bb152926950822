"""``scripts/setup.sh``: installs once, skips while the install is current, and says what it does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fake_checkout(tmp_path: Path) -> Path:
    """A checkout whose .venv python only records how it was called (no pip, no network)."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/../calls"\nexit 0\n', encoding="utf-8")
    python.chmod(0o755)
    spire = bin_dir / "spire"
    spire.write_text("#!/bin/sh\n", encoding="utf-8")
    spire.chmod(0o755)
    return tmp_path


def setup(checkout: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=checkout, capture_output=True, text=True, timeout=60, check=False
    )


def calls(checkout: Path) -> list[str]:
    path = checkout / ".venv" / "calls"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_setup_installs_when_there_is_no_stamp_and_says_so(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path)
    result = setup(checkout)
    assert "setup: installing spire-crawl with its extras into .venv" in result.stdout
    assert any("pip install --quiet -e .[dev,browser,redis," in call for call in calls(checkout))


def test_setup_skips_pip_while_the_stamp_is_newer_than_pyproject(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path)
    stamp = checkout / ".venv" / ".spire-installed"
    stamp.touch()
    later = (checkout / "pyproject.toml").stat().st_mtime + 10
    os.utime(stamp, (later, later))
    result = setup(checkout)
    assert result.returncode == 0
    assert result.stdout.startswith("setup: .venv is current")
    assert calls(checkout) == []
    os.utime(checkout / "pyproject.toml", (later + 10, later + 10))  # pyproject.toml changed: install again
    assert "setup: installing" in setup(checkout).stdout
    assert calls(checkout)
