"""The project's own test sites, on the public test kit (``spire.testing.LocalSite``)."""

from __future__ import annotations

from spire.testing import LocalSite, Reply, Request, RouteFn

__all__ = ["Reply", "Request", "RouteFn", "Site", "binary_tree"]

#: The tests' name for the kit's local site.
Site = LocalSite


def binary_tree(site: Site, pages: int = 100, *, prefix: str = "/page/", delay: float = 0.0) -> str:
    """Serve a binary tree of ``pages`` pages (page i links to 2i+1 and 2i+2); return the root URL."""
    for i in range(pages):
        links = "".join(f'<a href="{prefix}{c}">page {c}</a>\n' for c in (2 * i + 1, 2 * i + 2) if c < pages)
        site.page(f"{prefix}{i}", f"<html><head><title>Page {i}</title></head><body>{links}</body></html>", delay=delay)
    return site.url(f"{prefix}0")
