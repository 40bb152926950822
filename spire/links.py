"""``Links``: queue the links a handler finds, as child seeds one level deeper.

    @router.default
    async def page(page: Html, links: Links) -> None:
        await links.same_hostname()                                   # every <a href> on this host
        await links.enqueue(selector="li.next a", tag="listing", limit=1)
        await links.follow("/sitemap.html")                           # a URL of your own, in scope

Every call runs one pipeline over its candidates: resolve, strategy, excludes, includes, dedup,
limit, build child seeds, depth and request-count admission, transform, then one staged batch. It
returns an ``EnqueueResult``: the seeds added and the candidates skipped, each with a
``SkipReason``. Staged links are pushed to the frontier together when the handler succeeds.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypedDict, Unpack

from spire_core import url as _url
from spire_core.admission import Scope, SkipReason, Strategy, check_strategy
from spire_core.context import Context
from spire_core.errors import ConfigError, InvalidUrl
from spire_core.seed import Seed

if TYPE_CHECKING:
    from lxml import etree
    from parsel import Selector

__all__ = ["DEFAULT_SELECTOR", "EnqueueResult", "LinkOptions", "Links", "Skipped", "Transform"]

#: What the shortcuts and a bare ``enqueue()`` extract: every link and image-map area.
DEFAULT_SELECTOR = "a[href], area[href]"

#: Changes a child seed before it is queued (return a new ``Seed``), or rejects it (return ``None``).
Transform = Callable[[Seed], Awaitable[Seed | None]]
#: A glob (a string) or a regular expression (a compiled pattern) matched against the whole URL.
Pattern = str | re.Pattern[str]

#: What a candidate must share with the page under each strategy (``all`` compares nothing).
_SCOPES: dict[str, Literal["hostname", "domain", "origin"]] = {
    "same_domain": "domain",
    "same_hostname": "hostname",
    "same_origin": "origin",
}


#: A candidate that passed the filters, before a seed is built for it: ``(url, unique key)``.
_Planned = tuple[str, str]
_new_tuple = tuple.__new__


def _skipped(url: str, reason: SkipReason) -> Skipped:
    # Half the cost of ``Skipped(url, reason)``: a page's duplicates can number in the dozens.
    return _new_tuple(Skipped, (url, reason))


class Skipped(NamedTuple):
    """A candidate a call did not queue: its URL (resolved where it could be) and why."""

    url: str
    reason: SkipReason


@dataclasses.dataclass(slots=True)
class EnqueueResult:
    """What one call queued, and what it skipped with the reason.

    Candidates that repeat within the call, and those past its ``limit``, are dropped silently.
    """

    added: list[Seed] = dataclasses.field(default_factory=list)
    skipped: list[Skipped] = dataclasses.field(default_factory=list)
    #: How many candidates the call looked at (links the selector picked, plus the URLs passed in).
    found: int = 0

    def skipped_for(self, reason: SkipReason | str) -> list[str]:
        """The URLs skipped for ``reason``, in candidate order."""
        return [skip.url for skip in self.skipped if skip.reason == reason]


class LinkOptions(TypedDict, total=False):
    """The options of ``Links.enqueue`` that the shortcuts pass through (all but ``strategy``)."""

    selector: str
    urls: Iterable[str] | str
    raw_urls: Iterable[str] | str
    base_url: str
    tag: str | None
    user_data: Mapping[str, Any] | None
    priority: int
    globs: Iterable[str] | str
    regex: Iterable[Pattern] | Pattern
    exclude: Iterable[Pattern] | Pattern
    transform: Transform | None
    limit: int | None
    forefront: bool
    skip_nofollow: bool


#: Candidates that resolve against one base, as written: ``(base, hrefs)``. A base of ``None``
#: marks explicit URLs, which must be absolute and bypass the strategy.
_Group = tuple[str | None, list[str]]


def _strings(values: Iterable[str] | str) -> list[str]:
    # One string is one URL, not an iterable of characters.
    return [values] if isinstance(values, str) else list(values)


def _matchers(
    patterns: Iterable[Pattern] | Pattern | None, *, option: str, strings_are_globs: bool
) -> tuple[Callable[[str], object], ...]:
    if patterns is None:
        return ()
    if isinstance(patterns, str | re.Pattern):
        patterns = [patterns]
    found: list[Callable[[str], object]] = []
    for pattern in patterns:
        if isinstance(pattern, re.Pattern):
            found.append(pattern.search)
        elif not isinstance(pattern, str):
            raise ConfigError(f"{option}: a pattern is a string or a compiled re.Pattern, not {pattern!r}")
        elif strings_are_globs:
            # fnmatch's translation is anchored at both ends: a glob matches the whole URL.
            found.append(re.compile(fnmatch.translate(pattern)).match)
        else:
            try:
                found.append(re.compile(pattern).search)
            except re.error as exc:
                raise ConfigError(f"{option}: {pattern!r} is not a valid regular expression: {exc}") from None
    return tuple(found)


def _any_of(matchers: tuple[Callable[[str], object], ...]) -> Callable[[str], object] | None:
    """One test for "any of these match": ``None`` for none, the matcher itself for one."""
    if not matchers:
        return None
    if len(matchers) == 1:
        return matchers[0]
    return lambda url: any(match(url) for match in matchers)


class _Target(NamedTuple):
    """What the filters read of a resolved link: its canonical key and what strategies compare."""

    key: str
    host: str
    origin: str
    rest: str


@functools.lru_cache(maxsize=16384)
def _target(url: str) -> _Target | SkipReason:
    """The ``_Target`` of a URL that ``join`` or ``absolute`` returned (already normalised), or why
    it cannot be queued. Cached: a site links to its menu pages from every page."""
    if not url.startswith(("http://", "https://")):
        return SkipReason.SCHEME
    try:
        parts = _url.split_normalized(url)
    except InvalidUrl:
        return SkipReason.INVALID_URL
    return _Target(parts.canonical, parts.host, parts.origin, parts.rest)


@functools.lru_cache(maxsize=256)
def _compiled(selector: str) -> etree.XPath:
    """``selector`` as a compiled XPath, translated once: evaluating it on the lxml tree directly
    skips the ``Selector`` object parsel would wrap around every link."""
    # Imported here (once a selector, the result is cached): ``import spire`` leaves lxml and parsel alone.
    from cssselect import SelectorError
    from lxml import etree
    from parsel.csstranslator import css2xpath

    try:
        xpath = css2xpath(selector)
        # Elements picked by a plain selector give their href: select the attribute in XPath itself,
        # so lxml hands back strings and no element is touched from Python.
        return etree.XPath(xpath if "::" in selector else f"({xpath})/@href", smart_strings=False)
    except (SelectorError, etree.XPathSyntaxError) as exc:
        raise ConfigError(f"selector {selector!r} is not a valid CSS selector: {exc}") from None


#: Elements whose ``rel`` names ``nofollow`` (any case, among other values).
_NOFOLLOW = (
    "contains(concat(' ', normalize-space(translate(@rel, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', "
    "'abcdefghijklmnopqrstuvwxyz')), ' '), ' nofollow ')"
)


@functools.lru_cache(maxsize=64)
def _compiled_by_rel(selector: str, nofollow: bool) -> etree.XPath:
    """``selector``'s hrefs of the elements that are (or are not) marked ``rel="nofollow"``."""
    from cssselect import SelectorError
    from lxml import etree
    from parsel.csstranslator import css2xpath

    try:
        condition = _NOFOLLOW if nofollow else f"not({_NOFOLLOW})"
        return etree.XPath(f"({css2xpath(selector)})[{condition}]/@href", smart_strings=False)
    except (SelectorError, etree.XPathSyntaxError) as exc:
        raise ConfigError(f"selector {selector!r} is not a valid CSS selector: {exc}") from None


def _hrefs(page: Selector, selector: str) -> list[str]:
    """The link strings ``selector`` picks: each element's ``href``, or the strings a ``::attr()`` selects."""
    picked: list[Any] = _compiled(selector)(page.root)
    if "::" not in selector:
        return picked  # the XPath selects the href attributes themselves: strings, every one
    found: list[str] = []
    for item in picked:
        value = item if isinstance(item, str) else item.get("href")
        if value is not None:
            found.append(value)
    return found


#: Parses the page, once per request: how ``Links`` gets the document its selectors read.
PageParser = Callable[[], Awaitable["Selector"]]


def _extension(rest: str) -> str:
    """The lower-cased extension of the last path segment of ``path?query`` (``".jpg"``), or ``""``."""
    name = rest.partition("?")[0].rpartition("/")[2]
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


class Links:
    """The link queue of one request: what it finds becomes child seeds, staged until the handler succeeds.

    ``page`` parses the response (the ``Links`` extractor passes the request's shared ``Html``), so a
    selector works whether or not the handler took ``Html`` itself; without it, only ``urls`` and
    ``raw_urls`` can be queued.
    """

    def __init__(self, ctx: Context, page: PageParser | None = None) -> None:
        self._ctx = ctx
        self._page = page
        self._document: Selector | None = None

    @property
    def page_url(self) -> str:
        """The page's own URL: the response's after redirects, else the seed's. Strategies compare to it."""
        response = self._ctx.fetched_response
        return response.url if response is not None else self._ctx.seed.url

    @property
    def base_url(self) -> str:
        """The URL relative links resolve against: the page's ``<base href>`` when it was parsed, else ``page_url``."""
        page = self._document
        return self._document_base(page) if page is not None else self.page_url

    # -- shortcuts --------------------------------------------------------------------------------

    async def all(self, **options: Unpack[LinkOptions]) -> EnqueueResult:
        """Queue every http(s) link on the page (``a[href]``, ``area[href]``)."""
        return await self.enqueue(strategy="all", **options)

    async def same_hostname(self, **options: Unpack[LinkOptions]) -> EnqueueResult:
        """Queue the page's links to its own host name (any port)."""
        return await self.enqueue(strategy="same_hostname", **options)

    async def same_domain(self, **options: Unpack[LinkOptions]) -> EnqueueResult:
        """Queue the page's links within its registrable domain (``a.example.co.uk`` → ``example.co.uk``)."""
        return await self.enqueue(strategy="same_domain", **options)

    async def same_origin(self, **options: Unpack[LinkOptions]) -> EnqueueResult:
        """Queue the page's links to its own scheme, host and port."""
        return await self.enqueue(strategy="same_origin", **options)

    async def follow(
        self,
        urls_: Iterable[str] | str,
        *,
        tag: str | None = None,
        user_data: Mapping[str, Any] | None = None,
        priority: int = 0,
        forefront: bool = False,
        strategy: Strategy | Scope | None = None,
    ) -> EnqueueResult:
        """Queue ``urls_`` (relative ones resolved against the page) within the crawl's strategy.

        The crawl policy's ``strategy`` (``same_hostname`` unless set) applies as it does to
        ``enqueue``: an off-site link is skipped as ``strategy``. ``strategy="all"`` (or another
        strategy, or a ``Scope``) overrides it for this call. Depth, request-count admission and
        duplicate detection apply too.
        """
        return await self.enqueue(
            raw_urls=urls_,
            strategy=strategy,
            tag=tag,
            user_data=user_data,
            priority=priority,
            forefront=forefront,
        )

    # -- the pipeline -----------------------------------------------------------------------------

    async def enqueue(
        self,
        *,
        selector: str | None = None,
        urls: Iterable[str] | str | None = None,
        raw_urls: Iterable[str] | str | None = None,
        base_url: str | None = None,
        tag: str | None = None,
        user_data: Mapping[str, Any] | None = None,
        priority: int = 0,
        strategy: Strategy | Scope | None = None,
        globs: Iterable[str] | str | None = None,
        regex: Iterable[Pattern] | Pattern | None = None,
        exclude: Iterable[Pattern] | Pattern | None = None,
        transform: Transform | None = None,
        limit: int | None = None,
        forefront: bool = False,
        skip_nofollow: bool = False,
    ) -> EnqueueResult:
        """Queue links from the page (``selector``), explicit ``urls`` and ``raw_urls``; say what was skipped.

        With neither ``urls`` nor ``raw_urls``, links come from the parsed page with ``selector``
        (default ``a[href], area[href]``), which needs the handler to take ``Html``. ``urls`` are
        absolute and bypass the strategy; ``raw_urls`` resolve against ``base_url`` (default: the
        page's base). ``strategy`` overrides the crawl policy's. ``globs`` and ``regex`` include,
        ``exclude`` (globs as strings, regexes as compiled patterns) wins over them. ``transform``
        may change or reject each child seed. ``limit`` caps the candidates this call keeps;
        ``forefront`` queues them ahead of what is already waiting. ``skip_nofollow`` leaves out
        the page's links marked ``rel="nofollow"``, each counted as ``nofollow``.
        """
        ctx = self._ctx
        ctx.check_tag(tag)  # a tag typo stops the crawl here, at the call
        admission = ctx.admission
        scope = check_strategy(strategy) if strategy is not None else admission.policy.strategy
        includes = _matchers(globs, option="globs", strings_are_globs=True)
        includes += _matchers(regex, option="regex", strings_are_globs=False)
        excludes = _matchers(exclude, option="exclude", strings_are_globs=True)
        if limit is not None and limit < 0:
            raise ConfigError(f"limit must be 0 or more, not {limit}")
        if base_url is not None:
            if raw_urls is None:
                raise ConfigError("base_url resolves raw_urls; pass raw_urls too")
            try:
                _url.check(base_url)
            except InvalidUrl:
                raise ConfigError(f"base_url must be an absolute http(s) URL, not {base_url!r}") from None

        result = EnqueueResult()
        if selector is not None or (urls is None and raw_urls is None):
            await self._parse()
        groups = self._candidates(selector, urls, raw_urls, base_url, skip_nofollow, result)
        result.found = sum(len(hrefs) for _, hrefs in groups)
        kept = self._filtered(groups, scope, includes, excludes, result)
        if limit is not None:
            del kept[limit:]
        parent = ctx.seed
        # A strategy other than the crawl's rides on each child, so its redirects are judged by the
        # strategy of the call that queued it ("all" included: a link from ``links.all()`` may redirect
        # off-site as it may link there).
        carried = scope if isinstance(scope, str) and scope != admission.policy.strategy else None
        staged = self._staged_keys()
        # Admission runs on (url, key) pairs: most links on a page were seen before, and no seed is
        # built for them. Every child sits one level below the parent.
        planned = await self._admitted(kept, parent.depth + 1, staged, result)
        children = [
            parent.child(
                url,
                unique_key=key,  # worked out from the same parse as the filters: no second parse
                tag=tag,
                user_data=dict(user_data) if user_data is not None else None,
                priority=priority,
                strategy=carried,
            )
            for url, key in planned
        ]

        # Hold the admitted seeds' places while the transform awaits, so that a concurrent request
        # cannot take them; give them back and stage (which holds the survivors') with no await between.
        reserved = len(children)
        admission.reserve(reserved)
        try:
            if transform is not None:
                children = await self._transformed(children, transform, staged, result)
        finally:
            admission.release(reserved)
        ctx.enqueue(children, forefront=forefront)
        result.added = children
        if result.skipped:
            await admission.skipped(result.skipped, referrer=ctx.seed.url, depth=ctx.seed.depth + 1)
        return result

    # -- steps ------------------------------------------------------------------------------------

    async def _parse(self) -> None:
        if self._document is None:
            if self._page is None:
                raise ConfigError(
                    "extracting links with a selector needs the page: take Links as a handler parameter "
                    "(it parses the page), or pass the links as urls= or raw_urls=",
                    url=self._ctx.seed.url,
                )
            self._document = await self._page()

    def _document_base(self, page: Selector) -> str:
        # <base> belongs in <head>, where the HTML parser also puts it: no scan of the whole body.
        base = page.root.find("head/base[@href]")
        href = base.get("href") if base is not None else None
        page_url = self.page_url
        if href:
            joined = _url.join(page_url, href)
            if joined is not None and joined.startswith(("http://", "https://")):
                return joined
        return page_url

    def _candidates(
        self,
        selector: str | None,
        explicit: Iterable[str] | str | None,
        raw: Iterable[str] | str | None,
        base_url: str | None,
        skip_nofollow: bool,
        result: EnqueueResult,
    ) -> list[_Group]:
        """Links from the page (by ``selector``), then ``raw`` strings, then ``explicit`` absolute URLs."""
        found: list[_Group] = []
        if selector is not None or (explicit is None and raw is None):
            page = self._document
            assert page is not None  # parsed by enqueue() before it asks for candidates
            base = self._document_base(page)
            css = selector or DEFAULT_SELECTOR
            if skip_nofollow and "::" not in css:
                hrefs = _compiled_by_rel(css, False)(page.root)
                join = _url.joiner(base)
                # Recorded as the absolute URL a follow would have queued (its raw href when it has none).
                result.skipped.extend(
                    _skipped(join(href) or href, SkipReason.NOFOLLOW) for href in _compiled_by_rel(css, True)(page.root)
                )
            else:
                hrefs = _hrefs(page, css)
            found.append((base, hrefs))
        if raw is not None:
            found.append((base_url if base_url is not None else self.base_url, _strings(raw)))
        if explicit is not None:
            found.append((None, _strings(explicit)))
        return found

    def _filtered(
        self,
        groups: list[_Group],
        scope: Strategy | Scope,
        includes: tuple[Callable[[str], object], ...],
        excludes: tuple[Callable[[str], object], ...],
        result: EnqueueResult,
    ) -> list[tuple[str, str]]:
        """Resolve each candidate, then filter by scheme, strategy, excludes and includes; drop repeats.

        Returns ``(url, canonical key)`` pairs. Each candidate is parsed once; a URL that repeats
        within the call is dropped silently, and so is a repeated rejection; another spelling of a
        URL kept (the same canonical key) is a duplicate.
        """
        excluded, included = _any_of(excludes), _any_of(includes)
        policy = self._ctx.admission.policy
        max_bytes, extensions = policy.max_url_bytes, policy.ignored_extensions
        # A str test first: isinstance against a runtime-checkable protocol costs microseconds a call.
        custom = None if isinstance(scope, str) else scope
        related = _SCOPES.get(scope) if isinstance(scope, str) else None
        page_key = _url.split(self.page_url).scope_key(related) if related is not None else None
        kept: list[tuple[str, str]] = []
        keys: set[str] = set()
        spellings: set[str] = set()
        rejected: set[Skipped] = set()
        skipped = result.skipped

        def skip(url: str, reason: SkipReason) -> None:
            entry = _skipped(url, reason)
            if entry not in rejected:
                rejected.add(entry)
                skipped.append(entry)

        for against, hrefs in groups:
            resolve = _url.absolute if against is None else _url.joiner(against)
            compared = related if against is not None else None  # explicit URLs bypass the strategy
            for raw in hrefs:
                url = resolve(raw)
                if url is None:
                    skip(raw, SkipReason.INVALID_URL)
                    continue
                if max_bytes is not None and len(url) > max_bytes and len(url.encode()) > max_bytes:
                    continue  # dropped without a count: nobody serves such URLs
                target = _target(url)
                if isinstance(target, SkipReason):
                    skip(url if target is SkipReason.SCHEME else raw, target)
                    continue
                key = target.key
                if compared is not None and page_key != (
                    target.host
                    if compared == "hostname"
                    else target.origin
                    if compared == "origin"
                    else _url.registrable_domain(target.host)
                ):
                    skip(url, SkipReason.STRATEGY)
                elif custom is not None and not custom.admits(url):
                    skip(url, SkipReason.SCOPE)
                elif extensions and _extension(target.rest) in extensions:
                    skip(url, SkipReason.EXTENSION)
                elif (excluded is not None and excluded(url)) or (included is not None and not included(url)):
                    skip(url, SkipReason.PATTERN)
                elif key not in keys:
                    keys.add(key)
                    spellings.add(url)
                    kept.append((url, key))
                elif url not in spellings:
                    spellings.add(url)  # another spelling of a link kept above: a duplicate, counted once
                    skip(url, SkipReason.DUPLICATE)
        return kept

    async def _admitted(
        self, children: list[_Planned], depth: int, staged: set[str], result: EnqueueResult
    ) -> list[_Planned]:
        """Admission of children ``depth`` links from the start: the depth limit, then duplicates,
        then the crawl-wide request count.

        Duplicates go before the count so that rediscovered links never use up the budget.
        """
        admission = self._ctx.admission
        if admission.too_deep(depth):
            result.skipped.extend(_skipped(url, SkipReason.DEPTH) for url, _ in children)
            return []
        children = [children[i] for i in await self._unseen(children, staged, result)]
        room = admission.room()
        if room is not None:
            # No await between reading the room here and reserving the places in enqueue().
            for url, _ in children[room:]:
                result.skipped.append(_skipped(url, SkipReason.REQUEST_LIMIT))
            del children[room:]
        return children

    def _staged_keys(self) -> set[str]:
        return {seed.unique_key for batch, _ in self._ctx.staged_links for seed in batch}

    async def _unseen(self, children: list[_Planned], staged: set[str], result: EnqueueResult) -> list[int]:
        """The indices of the ``(url, key)`` children not queued before, staged earlier by this
        request, or repeated; the others are skipped as duplicates."""
        if not children:
            return []
        seen = await self._ctx.admission.seen([key for _, key in children])
        kept: list[int] = []
        batch: set[str] = set()
        skipped = result.skipped
        duplicate = SkipReason.DUPLICATE
        for index, (url, key) in enumerate(children):
            if seen[index] or key in staged or key in batch:
                skipped.append(_new_tuple(Skipped, (url, duplicate)))
            else:
                batch.add(key)
                kept.append(index)
        return kept

    async def _transformed(
        self, children: list[Seed], transform: Transform, staged: set[str], result: EnqueueResult
    ) -> list[Seed]:
        """Run ``transform`` on each seed; seeds whose unique key it changed are checked for duplicates again."""
        out: list[Seed] = []
        changed = False
        for child in children:
            returned = transform(child)
            if not inspect.isawaitable(returned):
                raise ConfigError("transform must be an async function: async def transform(seed) -> Seed | None")
            seed = await returned
            if seed is None:
                result.skipped.append(_skipped(child.url, SkipReason.TRANSFORM))
                continue
            if not isinstance(seed, Seed):
                raise ConfigError(f"transform returns a Seed or None, not {type(seed).__name__}")
            changed = changed or seed.unique_key != child.unique_key
            out.append(seed)
        if not changed:
            return out
        return [out[i] for i in await self._unseen([(seed.url, seed.unique_key) for seed in out], staged, result)]
