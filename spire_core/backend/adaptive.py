"""``AdaptiveBackend``: HTTP first, and the browser only for the pages that need it.

    backend = AdaptiveBackend(BrowserBackend(), needs_browser={"listing": missing("#results li")})
    Crawler(router, backend=backend)

Each page is fetched over HTTP; when its tag's predicate says the HTTP body is not enough (here:
the selector the handler reads matches nothing in it), the page is loaded again in the browser and
the rendered page is what the handler gets. The same router runs unchanged on HTTP, browser or
adaptive: extractors never know which backend answered.

What rendering changed is learned per tag. After ``learn_after`` pages of a tag: when rendering
changed none of them, the tag stays on HTTP from then on; when HTTP never sufficed and rendering
changed every one, the tag's pages go straight to the browser, skipping the HTTP fetch. A tag with
no predicate is probed (``default="probe"``): its first pages are rendered and compared with their
HTTP body (links and text), and the verdict is learned the same way.

A page fetched over HTTP and then rendered is two requests to the site: the render waits for the
origin's rate spacing and Crawl-delay like any request, and the crawl counts and logs both (the
rendered response holds the HTTP one in ``fetched_before``).

A tag can be forced (``force={"api": "http", "search": "browser"}``), and so can one seed
(``Seed(user_data={"browser.render": True})``). Every decision is counted in ``stats``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Literal

from spire_core import errors, html
from spire_core.backend.abilities import Forwarding, user_agent_of
from spire_core.backend.base import Backend
from spire_core.backend.browser import AsyncDriver, BrowserBackend
from spire_core.response import Response
from spire_core.seed import Seed
from spire_core.session.pacing import one_more
from spire_core.sniff import HTML_TYPES
from spire_core.url import is_robots_txt

__all__ = ["RENDER_KEY", "AdaptiveBackend", "AdaptiveStats", "NeedsBrowser", "missing"]

#: A predicate of the HTTP response: ``True`` when the page must be rendered in the browser.
NeedsBrowser = Callable[[Response], bool]
#: ``Seed.user_data`` key forcing one seed: ``True`` renders it in the browser, ``False`` keeps it on HTTP.
RENDER_KEY = "browser.render"


def missing(css: str) -> NeedsBrowser:
    """A predicate: the page needs the browser when ``css`` matches nothing in its HTTP body."""
    from cssselect import GenericTranslator, SelectorError

    try:
        GenericTranslator().css_to_xpath(css)
    except SelectorError as exc:
        raise errors.ConfigError(f"not a CSS selector: {css!r} ({exc})") from None

    def needs_browser(response: Response) -> bool:
        page = html.selector(response.body, response.encoding, response.url)
        return not page.css(css)

    needs_browser.__name__ = f"missing({css!r})"
    return needs_browser


def _content(response: Response) -> tuple[frozenset[str], int]:
    """What a page shows a crawler: the links it has, and how much readable text."""
    page = html.selector(response.body, response.encoding, response.url)
    return frozenset(page.css("a::attr(href)").getall()), len(html.text(response.body))


def _changed(before: Response, after: Response) -> bool:
    """Whether rendering changed what a crawler reads: other links, or a good deal more or less text."""
    links_before, text_before = _content(before)
    links_after, text_after = _content(after)
    return links_before != links_after or abs(text_after - text_before) > max(200, text_before // 5)


@dataclasses.dataclass
class _Learning:
    """What one tag's pages taught: how many were judged, rendered, changed by rendering, fine over HTTP."""

    judged: int = 0
    http_sufficed: int = 0
    rendered: int = 0
    changed: int = 0


@dataclasses.dataclass
class AdaptiveStats:
    """Decisions by kind (``http``, ``rendered``, ``browser-only``, ...), overall and per tag."""

    decisions: Counter[str] = dataclasses.field(default_factory=Counter)
    by_tag: defaultdict[str | None, Counter[str]] = dataclasses.field(default_factory=lambda: defaultdict(Counter))

    def count(self, tag: str | None, decision: str) -> None:
        self.decisions[decision] += 1
        self.by_tag[tag][decision] += 1

    def counted(self, response: Response, tag: str | None, decision: str) -> Response:
        """``response``, counted under ``decision`` here and marked with it for the crawl's stats."""
        self.count(tag, decision)
        response.rendering = decision
        return response

    @property
    def renders(self) -> int:
        """Pages loaded in the browser, whatever the reason."""
        return sum(count for decision, count in self.decisions.items() if decision != "http")

    def __str__(self) -> str:
        return " ".join(f"{decision}={count}" for decision, count in sorted(self.decisions.items()))


def _one_identity(browser: BrowserBackend, http: Backend) -> None:
    """``ConfigError`` when the two sides would tell a site two names (and robots.txt be read for one)."""
    named, sent = browser.user_agent, user_agent_of(http)
    if named is not None and sent is not None and sent != named:
        raise errors.ConfigError(
            f"AdaptiveBackend's browser sends User-Agent {named!r} but its http backend sends {sent!r}: "
            "a crawl has one identity, so give both the same user_agent"
        )


class AdaptiveBackend(Forwarding):
    """Fetches over HTTP, and renders in ``browser`` only the pages whose tag's predicate asks for it.

    - ``needs_browser``: tag -> predicate of the HTTP response (``missing(css)`` is the usual one).
    - ``default``: the predicate for other tags, or ``"probe"`` (render the first pages and learn
      whether rendering changes them), ``"http"`` or ``"browser"``.
    - ``force``: tag -> ``"http"`` or ``"browser"``, never learned over.
    - ``learn_after``: pages of a tag judged before its verdict is learned; ``None`` never learns.
    - ``http``: the HTTP backend (by default an ``HttpBackend`` through the browser's ``proxies``,
      one pool for both sides: an origin keeps its proxy whichever side fetches it; closed with this one).

    The crawl has one identity: the HTTP side sends the browser's ``user_agent`` (an ``http`` given
    with another is a ``ConfigError``), and robots.txt is obeyed for its product token.
    """

    def __init__(
        self,
        browser: BrowserBackend,
        *,
        needs_browser: Mapping[str, NeedsBrowser] | None = None,
        default: NeedsBrowser | Literal["probe", "http", "browser"] = "probe",
        force: Mapping[str, Literal["http", "browser"]] | None = None,
        learn_after: int | None = 3,
        http: Backend | None = None,
    ) -> None:
        if learn_after is not None and learn_after < 1:
            raise errors.ConfigError(f"learn_after must be at least 1 page, not {learn_after}")
        if isinstance(default, str) and default not in ("probe", "http", "browser"):
            raise errors.ConfigError(f"default must be a predicate, 'probe', 'http' or 'browser', not {default!r}")
        for tag, choice in (force or {}).items():
            if choice not in ("http", "browser"):
                raise errors.ConfigError(f"force[{tag!r}] must be 'http' or 'browser', not {choice!r}")
        self.browser = browser
        self.http: Backend = http if http is not None else browser.http_beside()
        _one_identity(browser, self.http)
        #: Whose abilities it forwards (user agent, timeouts, pool stats, downloads): its HTTP side's.
        self.backend = self.http
        self.needs_browser = dict(needs_browser or {})
        self.default = default
        self.force = dict(force or {})
        self.learn_after = learn_after
        self.stats = AdaptiveStats()
        self._learned: dict[str | None, _Learning] = defaultdict(_Learning)
        self._verdicts: dict[str | None, Literal["http", "browser"]] = {}

    def sends_conditional(self) -> bool:
        """No: a page it may render must come whole, so a recrawl compares the page it fetched."""
        return False

    def verdict(self, tag: str | None) -> Literal["http", "browser"] | None:
        """What has been learned for ``tag``'s pages, if anything yet."""
        return self._verdicts.get(tag)

    def _choice(self, seed: Seed) -> tuple[Literal["http", "browser"] | None, str]:
        """A decision made before any fetch, and its name; ``None`` when the HTTP response must decide."""
        forced = (seed.user_data or {}).get(RENDER_KEY)
        if forced is not None:
            return ("browser", "forced-browser") if forced else ("http", "forced-http")
        tag = seed.tag
        if tag is not None and tag in self.force:
            return self.force[tag], f"forced-{self.force[tag]}"
        if tag in self._verdicts:
            verdict = self._verdicts[tag]
            return verdict, "browser-only" if verdict == "browser" else "http"
        if (tag is None or tag not in self.needs_browser) and self.default in ("http", "browser"):
            return ("http", "http") if self.default == "http" else ("browser", "browser-only")
        return None, ""

    async def fetch(self, seed: Seed) -> Response:
        """The page over HTTP, or rendered in the browser when it needs it (see the class docstring).

        robots.txt, which the crawl reads before an origin's pages, is no page: it goes over HTTP,
        uncounted in the decisions.
        """
        if is_robots_txt(seed.url):
            return await self.http.fetch(seed)
        choice, decision = self._choice(seed)
        if choice == "browser":
            return self.stats.counted(await self.browser.fetch(seed), seed.tag, decision)
        response = await self.http.fetch(seed)
        if choice == "http" or not self._renderable(response):
            return self.stats.counted(response, seed.tag, decision or "http")
        predicate = self.needs_browser.get(seed.tag) if seed.tag is not None else None
        if predicate is None and not isinstance(self.default, str):
            predicate = self.default
        learning = self._learned[seed.tag]
        if predicate is not None and not predicate(response):
            learning.judged += 1
            learning.http_sufficed += 1
            self._learn(seed.tag)
            return self.stats.counted(response, seed.tag, "http")
        await one_more()  # the render is a request to the origin too: it waits for its spacing
        rendered = await self.browser.fetch(seed)
        rendered.fetched_before = response
        changed = (not predicate(rendered)) if predicate is not None else _changed(response, rendered)
        learning.judged += 1
        learning.rendered += 1
        learning.changed += changed
        self._learn(seed.tag)
        return self.stats.counted(rendered, seed.tag, "rendered" if predicate is not None else "probed")

    @staticmethod
    def _renderable(response: Response) -> bool:
        """Only an HTML page that arrived (not a redirect, an error or another type) is worth rendering."""
        return response.status < 300 and (response.content_type or "text/html") in HTML_TYPES

    def _learn(self, tag: str | None) -> None:
        learning = self._learned[tag]
        if self.learn_after is None or tag in self._verdicts or learning.judged < self.learn_after:
            return
        if learning.rendered and not learning.changed:
            self._verdicts[tag] = "http"  # rendering never changed a page of this tag
        elif not learning.http_sufficed and learning.changed == learning.rendered:
            self._verdicts[tag] = "browser"  # HTTP was never enough, and rendering always was
        elif self.default == "probe" and (tag is None or tag not in self.needs_browser):
            # A probed tag whose pages differ: render them all, since nothing can tell which need it.
            self._verdicts[tag] = "browser"

    def driver_for(self, response: Response) -> AsyncDriver:
        """The browser tab holding ``response``'s page, while its request is open; ``ConfigError`` if none."""
        try:
            return self.browser.driver_for(response)
        except errors.ConfigError:
            tag = response.seed.tag if response.seed is not None else None
            raise errors.ConfigError(
                "this page has no browser tab: it was fetched over HTTP, or its request has ended; a handler "
                f"that takes a Driver needs its tag rendered: AdaptiveBackend(force={{{tag!r}: 'browser'}})",
                url=response.url,
            ) from None

    async def aclose(self) -> None:
        """Close both backends (an ``http`` backend passed in is closed too: it belongs to this one)."""
        try:
            await self.http.aclose()
        finally:
            await self.browser.aclose()
