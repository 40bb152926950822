"""``spire new`` writes a project whose own test passes; ``spire shell`` answers piped Python."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.sites.server import Site

ROOT = Path(__file__).resolve().parents[2]


def spire(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spire", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_spire_new_writes_a_project_whose_test_passes(tmp_path: Path) -> None:
    made = spire("new", "shopcrawl", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "shopcrawl"
    assert sorted(str(path.relative_to(project)) for path in project.rglob("*") if path.is_file()) == [
        "README.md",
        "crawl.py",
        "pyproject.toml",
        "tests/test_crawl.py",
    ]
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout
    again = spire("new", "shopcrawl", cwd=tmp_path)
    assert again.returncode == 2
    assert "already exists" in again.stderr


def _installed_by(requirement: str) -> set[str]:
    """The distributions ``pip install requirement`` installs directly, for spire-crawl per our pyproject."""
    wanted = re.fullmatch(r"spire-crawl(?:\[(?P<extras>[^\]]*)\])?", requirement)
    assert wanted is not None, f"{requirement} does not install spire-crawl"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in filter(None, (wanted["extras"] or "").split(",")):
        requirements += project["optional-dependencies"][extra.strip()]
    return {re.split(r"[\s<>=!~\[;]", line, maxsplit=1)[0].lower() for line in requirements}


def test_spire_new_declares_what_its_test_needs_and_its_readme_installs_it(tmp_path: Path) -> None:
    assert spire("new", "shopcrawl", cwd=tmp_path).returncode == 0
    project = tmp_path / "shopcrawl"
    readme = (project / "README.md").read_text(encoding="utf-8")
    installs = re.findall(r"pip install '?([^'\s]+)'?", readme)
    assert installs, readme
    for requirement in installs:
        assert {"pytest"} <= _installed_by(requirement), f"the README's {requirement} does not install pytest"
    declared = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    assert declared["project"]["dependencies"] == ["spire-crawl"]
    (dev,) = declared["dependency-groups"]["dev"]
    assert {"pytest", "pytest-httpserver"} <= _installed_by(dev)


def test_spire_new_runs_with_spire_run(site: Site, tmp_path: Path) -> None:
    site.page("/", "<title>Home</title><a href='/a'>a</a>")
    site.page("/a", "<title>A</title>")
    assert spire("new", "mini", cwd=tmp_path).returncode == 0
    ran = spire("run", "crawl.py", "--seed", site.url("/"), "-o", "items.jsonl", cwd=tmp_path / "mini")
    assert ran.returncode == 0, ran.stderr
    assert len((tmp_path / "mini" / "items.jsonl").read_text(encoding="utf-8").splitlines()) == 2


def test_spire_shell_answers_a_piped_expression(site: Site, tmp_path: Path) -> None:
    site.page("/", "<title>Shell home</title><a href='/next'>next</a>")
    site.page("/next", "<title>Next page</title>", status=404)
    code = (
        "print('TITLE', html.css('title::text').get(), response.status)\n"
        "fetch(response.url + 'next')\n"
        "print('THEN', html.css('title::text').get(), response.status)\n"
    )
    shell = spire("shell", site.url("/"), cwd=tmp_path, stdin=code)
    assert shell.returncode == 0, shell.stderr
    assert "TITLE Shell home 200" in shell.stdout
    assert "THEN Next page 404" in shell.stdout


MANUAL = Path("/usr/share/doc/postgresql-doc-15/html")


def test_spire_shell_parses_an_xhtml_page_as_a_handler_does_and_fetches_relative_links(
    site: Site, tmp_path: Path
) -> None:
    # The PostgreSQL manual's pages are XHTML (an XML declaration first): parsed as XML, the
    # namespace hides every element from `title` and `a`.
    for name in ("index.html", "sql-select.html"):
        site.page(f"/pg/{name}", (MANUAL / name).read_text(encoding="utf-8"))
    code = (
        "print('TITLE', html.css('title::text').get(), len(html.css('a')) > 10)\n"
        "fetch('sql-select.html')\n"
        "print('THEN', html.css('title::text').get(), response.url)\n"
    )
    shell = spire("shell", site.url("/pg/index.html"), cwd=tmp_path, stdin=code)
    assert shell.returncode == 0, shell.stderr
    assert "TITLE PostgreSQL 15." in shell.stdout
    assert " True" in shell.stdout.split("TITLE", 1)[1].splitlines()[0]
    assert f"THEN SELECT {site.url('/pg/sql-select.html')}" in shell.stdout
