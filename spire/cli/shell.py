"""``spire shell URL``: fetch a page and explore it in Python, like ``scrapy shell``.

The namespace holds ``response`` (spire's ``Response``), ``html`` (a parsel ``Selector`` over it,
parsed exactly as a handler's ``Html`` is) and ``fetch(url)``, which fetches another page (a
relative URL resolves against the page shown) and rebinds both. IPython is used when it is
installed and the input is a terminal; otherwise Python's own ``code`` console, which also reads
piped input: ``echo "html.css('title::text').get()" | spire shell URL``.
"""

from __future__ import annotations

import argparse
import code
import sys
from typing import Any

from spire.extract import Error
from spire.router import Router
from spire_core import html, url
from spire_core.crawler import Crawler
from spire_core.errors import FetchError, InvalidUrl
from spire_core.frontier.memory import MemoryFrontier
from spire_core.response import Response
from spire_core.seed import Seed

__all__ = ["Shell", "add_parser"]

EXAMPLES = """examples:
  spire shell https://example.com/
  echo "print(html.css('title::text').get())" | spire shell https://example.com/
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    shell = commands.add_parser(
        "shell",
        parents=[common],
        help="fetch a page and explore it in an interactive Python",
        description="Fetch URL and open an interactive Python with `response`, `html` (a parsel Selector) "
        "and `fetch(url)` to load another page. IPython when installed, else Python's console.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    shell.add_argument("url", help="the page to fetch first")
    shell.set_defaults(command_fn=run_shell)


class Shell:
    """The shell's namespace: the last fetched ``response`` and ``html``, and ``fetch``."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"fetch": self.fetch, "response": None, "html": None}

    def fetch(self, target: str) -> Response:
        """Fetch ``target`` (redirects followed, any status kept) and bind ``response`` and ``html`` to it.

        A relative ``target`` (``fetch("sql-select.html")``) resolves against the page shown.
        """
        address = self._resolve(target)
        got: list[Response] = []
        errors: list[BaseException] = []
        router = Router()

        @router.default
        async def keep(response: Response) -> None:
            got.append(response)

        @router.failed
        async def failed(error: Error) -> None:
            if error is not None:
                errors.append(error)

        crawler = Crawler(router, raise_for_status=False, frontier=MemoryFrontier().retry(1))
        crawler.failures.in_full = 0
        crawler.run([Seed(address)])
        if not got:
            raise errors[0] if errors else FetchError("no response", url=address)
        response = got[0]
        self.namespace["response"] = response
        self.namespace["html"] = html.selector(response.body, response.encoding, response.url)
        return response

    def _resolve(self, target: str) -> str:
        shown: Response | None = self.namespace["response"]
        if shown is None:
            return target
        joined = url.join(shown.url, target)
        if joined is None:
            raise InvalidUrl(f"{target!r} is not a URL, nor a link relative to {shown.url}", url=target)
        return joined


def run_shell(args: argparse.Namespace) -> int:
    shell = Shell()
    response = shell.fetch(args.url)
    banner = (
        f"spire shell: {response.status} {response.url}\n"
        "  response  the Response (status, headers, text)\n"
        "  html      a parsel Selector: html.css('title::text').get()\n"
        "  fetch(url) loads another page into both"
    )
    if sys.stdin.isatty():
        try:
            from IPython import start_ipython  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            pass
        else:
            print(banner)
            start_ipython(argv=[], user_ns=shell.namespace)
            return 0
    code.interact(banner=banner, local=shell.namespace, exitmsg="")
    return 0
