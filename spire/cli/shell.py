"""``spire shell URL``: fetch a page and explore it in Python, like ``scrapy shell``.

The namespace holds ``response`` (spire's ``Response``), ``html`` (a parsel ``Selector`` over it)
and ``fetch(url)``, which fetches another page and rebinds both. IPython is used when it is
installed and the input is a terminal; otherwise Python's own ``code`` console, which also reads
piped input: ``echo "html.css('title::text').get()" | spire shell URL``.
"""

from __future__ import annotations

import argparse
import code
import sys
from typing import Any

from parsel import Selector

from spire.extract import Error
from spire.router import Router
from spire_core.crawler import Crawler
from spire_core.errors import FetchError
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

    def fetch(self, url: str) -> Response:
        """Fetch ``url`` (redirects followed, any status kept) and bind ``response`` and ``html`` to it."""
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
        crawler.run([Seed(url)])
        if not got:
            raise errors[0] if errors else FetchError("no response", url=url)
        response = got[0]
        self.namespace["response"] = response
        self.namespace["html"] = Selector(text=response.text, base_url=response.url)
        return response


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
