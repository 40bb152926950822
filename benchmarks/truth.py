"""Ground truth: the pages a crawl must find, computed from the HTML files on disk.

The rule is the crawlers' rule, applied to the files instead of the server: start at the site's
``index.html``; for every ``<a href>`` of an HTML page, resolve it against the page URL and drop the
fragment; keep it when it stays on the host and under the site's folder. A kept URL is a *page* when
the file it names exists (a path ending in ``/`` names its ``index.html``); it is *missing* when it
does not (the server answers 404). Every kept URL is fetched once by every crawler, missing ones
too. Only ``text/html`` files (``.html``, ``.htm``) are parsed for links; other files (images,
text, archives) are pages with an empty title and no links.

    python benchmarks/truth.py http://127.0.0.1:8631/postgresql/ /usr/share/doc/postgresql-doc-15/html
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import lxml.html

HTML_SUFFIXES = (".html", ".htm")


@dataclass
class Truth:
    """What a correct crawl of one site finds."""

    pages: dict[str, Path] = field(default_factory=dict)  # url -> file
    missing: set[str] = field(default_factory=set)  # linked, in scope, no file (404)
    links: dict[str, int] = field(default_factory=dict)  # url -> number of <a href> on the page
    titles: dict[str, str] = field(default_factory=dict)


def in_scope(url: str, prefix: str) -> bool:
    return url.startswith(prefix)


def key(url: str) -> str:
    """The comparison key of a URL: fragment dropped, percent-escapes decoded.

    Crawlers differ in how they escape a path (``%5B`` or ``[``); the file is the same.
    """
    url = url.split("#", 1)[0]
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc.lower(), urllib.parse.unquote(parts.path), parts.query, "")
    )


def file_for(url: str, prefix: str, root: Path) -> Path | None:
    relative = urllib.parse.unquote(urllib.parse.urlsplit(url).path)[len(urllib.parse.urlsplit(prefix).path) :]
    path = root / relative
    if relative == "" or relative.endswith("/"):
        path = path / "index.html"
    if ".." in Path(relative).parts:
        return None
    # os.path.isfile follows symlinks: a dangling one is a 404, as nginx serves it.
    return path if os.path.isfile(path) else None


def hrefs(path: Path) -> tuple[str, list[str]]:
    """The title and every ``<a href>`` value of an HTML file."""
    data = path.read_bytes()
    if not data.strip():
        return "", []
    document = lxml.html.document_fromstring(data)
    title = document.findtext(".//title") or ""
    return title.strip(), [a.get("href") for a in document.iter("a") if a.get("href") is not None]


def compute(start: str, root: Path) -> Truth:
    """Breadth-first over the files, from ``start`` (the folder URL, ending in ``/``)."""
    prefix = start
    truth = Truth()
    queue = deque([urllib.parse.urljoin(start, "index.html")])
    seen = {key(queue[0])}
    while queue:
        url = queue.popleft()
        path = file_for(url, prefix, root)
        if path is None:
            truth.missing.add(url)
            continue
        truth.pages[url] = path
        if not path.name.endswith(HTML_SUFFIXES):
            truth.links[url] = 0
            truth.titles[url] = ""
            continue
        title, values = hrefs(path)
        truth.titles[url] = title
        truth.links[url] = len(values)
        for value in values:
            joined = urllib.parse.urljoin(url, value.strip()).split("#", 1)[0]
            if not in_scope(joined, prefix):
                continue
            k = key(joined)
            if k not in seen:
                seen.add(k)
                queue.append(joined)
    return truth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("start", help="the site's folder URL, ending in /")
    parser.add_argument("root", type=Path, help="the folder on disk it serves")
    parser.add_argument("--json", type=Path, help="write {pages: [...], missing: [...]} here")
    args = parser.parse_args()
    truth = compute(args.start, args.root)
    suffixes: dict[str, int] = {}
    for url in truth.pages:
        suffix = Path(urllib.parse.urlsplit(url).path).suffix or "/"
        suffixes[suffix] = suffixes.get(suffix, 0) + 1
    print(f"pages {len(truth.pages)}  missing {len(truth.missing)}  by suffix {suffixes}", file=sys.stderr)
    links = sorted(truth.links.values())
    if links:
        print(f"links per page: mean {sum(links) / len(links):.1f}  max {links[-1]}", file=sys.stderr)
    for url in sorted(truth.missing)[:20]:
        print("missing", url, file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"pages": sorted(truth.pages), "missing": sorted(truth.missing)}))


if __name__ == "__main__":
    main()
