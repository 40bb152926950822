"""Every ```python block of docs/*.md and README.md runs as pasted.

Each block is its own script in a fresh temporary folder (a subprocess with a time limit).
``http://127.0.0.1:8000`` in a block means the bundled example shop: it is served on a free port
and the address rewritten to it. A block fenced ```python fragment is an excerpt and is not run.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.shop.server import ShopServer

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHOP = "http://127.0.0.1:8000"
TIMEOUT = 60.0
#: An opening fence: its info string says the language, and ``fragment`` marks an excerpt.
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\n]*)$")


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int
    info: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        words = self.info.split()
        return bool(words) and words[0] == "python" and "fragment" not in words[1:]


def blocks(page: Path) -> Iterator[Block]:
    """The fenced code blocks of a Markdown page, with the line each opens on."""
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        found = FENCE.match(lines[i])
        if found is None:
            i += 1
            continue
        fence, start, body = found["fence"], i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        yield Block(page, start, found["info"].strip(), "\n".join(body) + "\n")
        i += 1


def runnable() -> list[Block]:
    return [block for page in PAGES for block in blocks(page) if block.runs]


@pytest.fixture(scope="module")
def shop() -> Iterator[ShopServer]:
    with ShopServer() as server:
        yield server


def test_the_runner_finds_blocks_and_skips_fragments(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```python\nprint(1)\n```\n\n```python fragment\nx\n```\n\n```bash\nls\n```\n")
    found = list(blocks(page))
    assert [(block.line, block.info, block.runs) for block in found] == [
        (3, "python", True),
        (7, "python fragment", False),
        (11, "bash", False),
    ]
    assert found[0].code == "print(1)\n"


def run_block(block: Block, shop: ShopServer, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "block.py"
    script.write_text(block.code.replace(SHOP, shop.url("/").rstrip("/")), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        result = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.name} did not finish within {TIMEOUT:.0f} s")
    assert result.returncode == 0, f"{block.name} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.parametrize("block", runnable(), ids=lambda block: block.name)
def test_the_block_runs_as_pasted(block: Block, shop: ShopServer, tmp_path: Path) -> None:
    run_block(block, shop, tmp_path)


def test_the_readme_example_finds_every_book_and_writes_it_to_a_file(shop: ShopServer, tmp_path: Path) -> None:
    first = next(block for block in blocks(ROOT / "README.md") if block.runs)
    result = run_block(first, shop, tmp_path)
    assert " failed=0 " in result.stdout
    assert f"\n{len(shop.book_urls)} books; the first: " in result.stdout
    assert len((tmp_path / "books.jsonl").read_text(encoding="utf-8").splitlines()) == len(shop.book_urls)
    assert result.stderr == ""  # nothing went wrong, so nothing was logged


def test_the_readme_example_run_again_still_finds_each_book_once(shop: ShopServer, tmp_path: Path) -> None:
    first = next(block for block in blocks(ROOT / "README.md") if block.runs)
    run_block(first, shop, tmp_path)
    again = run_block(first, shop, tmp_path)
    assert f"\n{len(shop.book_urls)} books; the first: " in again.stdout
    assert len((tmp_path / "books.jsonl").read_text(encoding="utf-8").splitlines()) == len(shop.book_urls)
