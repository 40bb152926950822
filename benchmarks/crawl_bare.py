"""The benchmark job as a bare loop on spire's own dependencies: the ceiling spire can reach.

    .venv/bin/python benchmarks/crawl_bare.py --start http://127.0.0.1:8632/scipy/index.html --out pages.jsonl

httpx on the httpx-aiohttp transport, ada-url joins, parsel, anyio: a seen set, a queue and N
workers, no politeness, no retries, no canonical form (links are deduplicated as joined strings).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import ada_url
import anyio
import httpx
from httpx_aiohttp import AiohttpTransport
from parsel import Selector


async def crawl(starts: list[str], out: Path, concurrency: int) -> int:
    prefixes = tuple(start.rsplit("/", 1)[0] + "/" for start in starts)
    seen = set(starts)
    send, receive = anyio.create_memory_object_stream[str](math.inf)
    for start in starts:
        send.send_nowait(start)
    pending = len(starts)
    rows: list[str] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(transport=AiohttpTransport(limits=limits), limits=limits) as client:

        async def worker() -> None:
            nonlocal pending
            async for url in receive:
                try:
                    response = await client.get(url)
                    if response.status_code == 200 and "html" in response.headers.get("content-type", ""):
                        page = Selector(body=response.content, type="html")
                        hrefs = page.css("a::attr(href)").getall()
                        for href in hrefs:
                            try:
                                joined: str = ada_url.join_url(url, href.strip())
                            except ValueError:
                                continue
                            joined = joined.split("#", 1)[0]
                            if joined.startswith(prefixes) and joined not in seen:
                                seen.add(joined)
                                pending += 1
                                send.send_nowait(joined)
                        title = page.css("title::text").get(default="")
                        rows.append(json.dumps({"url": url, "title": title, "links": len(hrefs)}))
                finally:
                    pending -= 1
                    if pending == 0:
                        send.close()

        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker)
    await anyio.Path(out).write_text("".join(row + "\n" for row in rows))
    return len(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start", action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    started = time.perf_counter()
    pages = anyio.run(crawl, args.start, args.out, args.concurrency)
    print(f"pages={pages}")
    print(f"BENCH crawl_seconds={time.perf_counter() - started:.4f}")


if __name__ == "__main__":
    main()
