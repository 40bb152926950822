"""A site crawl over a ``SqliteFrontier`` file, run by ``test_engine.py`` in a subprocess it may kill.

    python resume_site.py FRONTIER_PATH ROOT_URL OUTPUT

Appends each kept page's URL to OUTPUT as it comes out, four requests at a time.
"""

from __future__ import annotations

import sys

import anyio

import spire
from spire import HostLimits
from spire_core import SqliteFrontier


async def main(path: str, root: str, output: str) -> None:
    async with SqliteFrontier(path) as frontier:
        crawl = spire.crawl(root, frontier=frontier, concurrency=4, host_limits=HostLimits(max_in_flight=4))
        with open(output, "a", encoding="utf-8") as out:  # noqa: ASYNC230 - a test script's one small file
            async with crawl:
                async for item in crawl:
                    if isinstance(item, spire.CrawlPage):
                        print(item.url, file=out, flush=True)
        print(crawl.stats, flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
