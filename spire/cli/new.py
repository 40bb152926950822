"""``spire new NAME``: write a small runnable project (router, item model, a test on a local site)."""

from __future__ import annotations

import argparse
import keyword
import re
from pathlib import Path

from spire_core.errors import ConfigError

__all__ = ["REQUIREMENTS", "add_parser", "write_project"]

CRAWL = '''"""{name}: a spire crawl. Run it: spire run crawl.py --seed https://example.com/ -o items.jsonl"""

from pydantic import BaseModel

from spire import Dataset, Html, Links, Router, Url


class Page(BaseModel):
    """What the crawl keeps from each page."""

    url: str
    title: str


router = Router()


@router.default
async def page(html: Html, url: Url, links: Links, pages: Dataset[Page]) -> None:
    """Keep each page's title and follow its links on the same host."""
    await pages.push(Page(url=url, title=html.css("title::text").get(default="")))
    await links.same_hostname()


seeds = ["https://example.com/"]
'''

TEST = '''"""The crawl against a local site: no network, the same code that crawls the real one."""

from pathlib import Path

from crawl import Page, router

from spire import Crawler, JsonlDataset
from spire.testing import LocalSite

PAGES = {{
    "/": "<title>Home</title><a href='/about'>about</a> <a href='https://elsewhere.example/'>away</a>",
    "/about": "<title>About</title><a href='/'>home</a>",
}}


def test_the_crawl_keeps_every_page_of_the_site_once(tmp_path: Path) -> None:
    out = tmp_path / "pages.jsonl"
    with LocalSite(PAGES) as site:
        stats = Crawler(router, datasets={{Page: JsonlDataset(Page, out)}}).run(site.url("/"))
    pages = [Page.model_validate_json(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(page.title for page in pages) == ["About", "Home"]
    assert stats.failed == 0
'''

#: What the project needs: spire to run, and spire's ``testing`` extra (pytest) for its test.
REQUIREMENTS = "spire-crawl[testing]"

PYPROJECT = """[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["spire-crawl"]

[dependency-groups]
# pip install '{requirements}' installs the same; uv installs this group by itself.
dev = ["{requirements}"]

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]  # the tests import crawl.py
"""

README = """# {name}

A [spire](https://pypi.org/project/spire-crawl/) crawl.

    pip install '{requirements}'                                   # spire, and pytest for the test
    spire run crawl.py --seed https://example.com/ -o items.jsonl   # crawl
    python -m pytest                                                 # its test, on a local site

With uv, `uv run pytest` installs the `dev` group that `pyproject.toml` declares, then runs the test.

`crawl.py` holds the router and the item model; `tests/test_crawl.py` crawls a local site built from
a dict with `spire.testing.LocalSite`.
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    new = commands.add_parser(
        "new",
        parents=[common],
        help="write a small runnable crawl project",
        description="Write NAME/ with crawl.py (a router and an item model), a test that crawls a local "
        f"site, a pyproject.toml declaring what it needs ({REQUIREMENTS}) and a README. The folder must "
        "not exist yet.",
        epilog="examples:\n  spire new shopcrawl && cd shopcrawl && python -m pytest",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    new.add_argument("name", help="the project's folder (a Python-style name: letters, digits, _ and -)")
    new.set_defaults(command_fn=new_project)


def write_project(folder: Path) -> list[Path]:
    """Write the project into ``folder`` (which must not exist); return the files written."""
    name = folder.name
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name) or keyword.iskeyword(name):
        raise ConfigError(f"a project name is letters, digits, _ and -, starting with a letter: not {name!r}")
    if folder.exists():
        raise ConfigError(f"{folder} already exists: choose another name")
    files = {
        "crawl.py": CRAWL.format(name=name),
        "tests/test_crawl.py": TEST.format(),
        "pyproject.toml": PYPROJECT.format(name=name, requirements=REQUIREMENTS),
        "README.md": README.format(name=name, requirements=REQUIREMENTS),
    }
    written = []
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def new_project(args: argparse.Namespace) -> int:
    folder = Path(args.name)
    for path in write_project(folder):
        print(f"wrote {path}")
    print(f"next: pip install '{REQUIREMENTS}' && cd {folder} && python -m pytest")
    return 0
