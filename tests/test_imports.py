"""``import spire`` imports only what every crawl needs; the rest of the public names arrive on first use."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import spire

#: Modules that ``import spire`` must leave alone: optional dependencies, and spire's own parts that
#: only some crawls use (each costs start-up time, some a lot: importlib.metadata about 30 ms).
HEAVY = (
    # The HTTP backend's libraries and the event loop, loaded by the first crawl that needs them.
    "aiohttp",
    "httpx",
    "charset_normalizer",
    "asyncio",
    "uvloop",
    "multiprocessing",
    "tomllib",
    "selenium",
    "aioquic",
    "httpcore",
    "ctypes",
    "trio",
    "redis",
    "warcio",
    "trafilatura",
    "pyarrow",
    "sqlite3",
    "rich",
    "importlib.metadata",
    "spire_core.backend.adaptive",
    "spire_core.backend.browser.driver",
    "spire_core.backend.connections",
    "spire_core.backend.dialer",
    "spire_core.backend.http",
    "spire_core.backend.identities",
    "spire_core.processes.messages",
    "spire_core.processes.pool",
    "spire_core.sitemaps",
    "spire_core.backend.browser.backend",
    "spire_core.backend.cache",
    "spire_core.backend.http3",
    "spire_core.dataset.sqlite",
    "spire_core.dataset.parquet",
    "spire_core.dataset.redis",
    "spire_core.frontier.sqlite",
    "spire_core.frontier.redis",
    "spire_core.ledger_sqlite",
    "spire_core.ledger_redis",
    "spire.cli",
    "spire.markdown",
    "spire.screenshot",
    "spire.site",
)
#: The HTML parser's libraries: loaded by the first page parsed, or by naming ``spire.Html`` (an
#: ``Annotated`` parsel ``Selector``), and by nothing else ``import spire`` does.
PARSER = ("parsel", "lxml", "w3lib", "cssselect", "email")
PACKAGES = (
    "spire",
    "spire_core",
    "spire_core.backend",
    "spire_core.backend.browser",
    "spire_core.dataset",
    "spire_core.frontier",
    "spire_core.frontier.redis",
    "spire_core.ledger_sqlite",
    "spire_core.ledger_redis",
    "spire_core.robots",
)
ROOT = Path(__file__).resolve().parent.parent


def imported_by(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(json.loads(result.stdout))


@pytest.mark.parametrize("code", ["import spire", "import spire_core", "from spire import Crawler, Router, Html, Seed"])
def test_a_plain_import_leaves_the_heavy_modules_alone(code: str) -> None:
    modules = imported_by(code)
    assert "spire" in modules or "spire_core" in modules
    assert sorted(modules.intersection(HEAVY)) == []


@pytest.mark.parametrize(
    "code",
    [
        "import spire",
        "import spire_core",
        "from spire import Crawler, Dataset, HostLimits, Links, Router, Seed, Text, Url",
        "from spire_core import Crawler, MemoryFrontier, Response, RobotsCache",
    ],
)
def test_a_plain_import_leaves_the_parser_and_the_http_libraries_alone(code: str) -> None:
    modules = imported_by(code)
    assert sorted(modules.intersection(HEAVY + PARSER)) == []


def test_naming_html_imports_the_parser_and_nothing_else_heavy() -> None:
    modules = imported_by("from spire import Html")
    assert "parsel" in modules
    assert sorted(modules.intersection(HEAVY)) == []


@pytest.mark.parametrize(
    ("code", "module"),
    [
        ("spire.HttpBackend", "aiohttp"),
        ("spire.Identities", "spire_core.backend.http"),
        ("spire.Driver", "spire_core.backend.browser.driver"),
        ("spire_core.SitemapReader", "spire_core.sitemaps"),
        ("spire.Response(url='http://a/', status=200)", "httpx"),
        ("spire.Crawler(spire.Router())", "aiohttp"),
    ],
)
def test_what_needs_a_library_imports_it_on_first_use(code: str, module: str) -> None:
    assert module in imported_by(f"import spire, spire_core\n{code}")


def test_naming_a_lazy_export_imports_its_module() -> None:
    modules = imported_by("import spire\nspire.SqliteFrontier")
    assert "spire_core.frontier.sqlite" in modules
    assert "spire.site" not in modules


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves_and_dir_lists_it(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module.__all__) <= set(dir(module))
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        module.Nope  # noqa: B018  # the lookup is the test


def test_spire_and_spire_core_export_the_same_objects() -> None:
    import spire_core

    for name in set(spire.__all__) & set(spire_core.__all__):
        assert getattr(spire, name) is getattr(spire_core, name), name


def test_the_version_is_the_one_pyproject_declares() -> None:
    with (ROOT / "pyproject.toml").open("rb") as file:
        assert spire.__version__ == tomllib.load(file)["project"]["version"]
