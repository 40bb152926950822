"""Every install command in the docs, the README, the examples and spire's messages names ``spire-crawl``.

``spire`` on PyPI is an unrelated project: ``pip install spire`` or ``pip install 'spire[redis]'``
installs someone else's code.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: An install command up to the end of its line or code span: what follows is its arguments.
INSTALL = re.compile(r"\b(?:pip3?|pipx|uv|poetry)\b(?:\s+pip)?\s+(?:install|add)\b(?P<args>[^\n`]*)")
#: The unrelated project, bare or with extras, as a word of a command (a message's closing quote and
#: parenthesis may follow it: ``"... pip install 'spire[http2]'")``).
WRONG = re.compile(r"""^['"]?spire(?:\[[^\]]*\])?['"]?[")]*$""")


def wrong_installs(text: str) -> list[str]:
    """The install commands in ``text`` that name ``spire`` (with or without extras) for spire-crawl."""
    return [
        found[0].strip() for found in INSTALL.finditer(text) if any(WRONG.match(word) for word in found["args"].split())
    ]


def sources() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("**/*.md")),
        *sorted((ROOT / "examples").glob("**/*.py")),
        *sorted((ROOT / "examples").glob("**/*.md")),
        *sorted((ROOT / "spire").glob("**/*.py")),
        *sorted((ROOT / "spire_core").glob("**/*.py")),
    ]


def test_the_check_finds_the_unrelated_package_in_every_form() -> None:
    wrong = [
        "pip install spire",
        "pip install 'spire[prometheus]'",
        'pip install -U "spire[http2,brotli]"',
        "uv add spire",
        "uv pip install spire[redis]",
    ]
    right = ["pip install spire-crawl", "pip install 'spire-crawl[markdown]'", "pip install -e '.[dev]'"]
    assert [wrong_installs(f"run `{command}` first") for command in wrong] == [[c] for c in wrong]
    assert [wrong_installs(command) for command in right] == [[], [], []]
    # A message's closing quote and parenthesis follow the command in spire's own source.
    assert wrong_installs("""ConfigError("needs h2: pip install 'spire[http2]'")""") == [
        """pip install 'spire[http2]'")"""
    ]


def test_no_doc_example_or_message_installs_the_unrelated_spire_package() -> None:
    found = {
        f"{path.relative_to(ROOT)}: {command}"
        for path in sources()
        for command in wrong_installs(path.read_text(encoding="utf-8"))
    }
    assert not found, "install spire-crawl, not spire (an unrelated PyPI project):\n" + "\n".join(sorted(found))
