"""``Router``: picks a handler for each seed by its tag, or by URL path when it has none.

router = Router()

@router.handler("listing")
async def listing(page: Html, links: Links) -> None: ...

@router.handler(path="/catalogue/*/index.html")      # untagged seeds whose path matches
async def book(page: Html, books: Dataset[Book]) -> None: ...

@router.default                                      # untagged seeds nothing else takes
async def other(url: Url) -> None: ...

@router.middleware                                   # around every handler
async def timing(ctx: Context, call_next: Next) -> Outcome | None:
    return await call_next(ctx)

@router.failed                                       # seeds that failed for good
async def failed(seed: SeedInfo, error: Error) -> None: ...
"""

from __future__ import annotations

import dataclasses
import fnmatch
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from spire.extract import Extractor, analyse, resolve
from spire_core.context import Context
from spire_core.errors import ConfigError
from spire_core.outcome import Done, Fail, PauseTag, Retry, SkipTag, Stop
from spire_core.outcome import Outcome as OutcomeValue
from spire_core.seed import Seed

__all__ = ["Handler", "Middleware", "Next", "Router", "returned", "unknown_tag"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
Next = Callable[[Context], Awaitable["OutcomeValue | None"]]
Middleware = Callable[[Context, Next], Awaitable["OutcomeValue | None"]]
_OUTCOMES = (Done, Retry, PauseTag, SkipTag, Stop, Fail)


@dataclasses.dataclass(frozen=True, slots=True)
class Handler:
    """A registered handler with its parameters' extractors, analysed once at registration."""

    fn: Callable[..., Awaitable[Any]]
    params: tuple[tuple[str, Extractor[Any]], ...]
    #: Whether block pages reach this handler as pages (``blocks=True``) instead of failing the seed.
    accepts_blocks: bool = False
    #: Whether it runs in the crawl's own process with ``processes=N`` too (``local=True``).
    local: bool = False
    #: Whether its seeds are pages a crawl with ``recrawl=`` keeps and revisits (``page=False``: no).
    page: bool = True

    @classmethod
    def of(
        cls, fn: Callable[..., Awaitable[Any]], *, blocks: bool = False, local: bool = False, page: bool = True
    ) -> Handler:
        """Analyse ``fn``'s parameters, their annotations resolved in ``fn``'s own module."""
        if inspect.isasyncgenfunction(fn):
            raise ConfigError(
                f"{fn.__qualname__} is an async generator: spire handlers do not yield requests or items. "
                "Queue links with `await links.follow(...)`, save items with `await dataset.push(...)`, "
                "and return None or an Outcome"
            )
        return cls(fn, tuple(analyse(fn)), blocks, local, page)

    @property
    def name(self) -> str:
        return self.fn.__name__

    async def __call__(self, ctx: Context) -> Any:
        ctx.accepts_blocks = self.accepts_blocks
        kwargs = {name: await resolve(ctx, extractor) for name, extractor in self.params}
        return await self.fn(**kwargs)


def unknown_tag(tag: str, known: Iterable[str]) -> str:
    """The message for a tag no handler takes: the known tags and the closest match."""
    names = sorted(known)
    if not names:
        return (
            f"no handler for tag {tag!r}: the router has no tagged handlers "
            "(queue the seed without a tag for the default handler)"
        )
    import difflib  # a mistake's message only

    close = difflib.get_close_matches(tag, names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"no handler for tag {tag!r}: {hint}the router knows {', '.join(map(repr, names))}"


def returned(value: object) -> str:
    """What a handler returned instead of an outcome, and what to do instead."""
    if isinstance(value, type) and value in _OUTCOMES:
        return f"the class {value.__name__}, not an instance: return {value.__name__}(...)"
    if isinstance(value, dict | list | tuple | BaseModel):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return (
            f"a {type(value).__name__} ({shown}); a handler returns None or an Outcome: "
            "push items with `await dataset.push(...)` and queue links with `await links.follow(...)`"
        )
    return f"{type(value).__name__}; a handler returns None or an Outcome (Done, Retry, Fail, ...)"


class Router:
    """Tag-based routing of seeds to handlers, with middleware and a failed hook."""

    def __init__(self) -> None:
        self._tags: dict[str, Handler] = {}
        self._paths: list[tuple[str, re.Pattern[str], Handler]] = []
        self._default: Handler | None = None
        self._failed: Handler | None = None
        self._middleware: list[Middleware] = []
        self._chain: Next | None = None

    def handler(
        self,
        tag: str | None = None,
        *,
        path: str | None = None,
        blocks: bool = False,
        local: bool = False,
        page: bool = True,
    ) -> Callable[[F], F]:
        """Register a handler for seeds with ``tag``, or for untagged seeds whose URL path matches ``path``.

        Block pages (``BlockRules``) fail their seed before a handler sees them; ``blocks=True``
        hands them to this handler as pages (``response.status`` and the body are the block's).
        ``local=True`` runs it in the crawl's own process with ``processes=N`` too, so the state it
        keeps (a counter, a budget) is the crawl's, exact, not a copy per worker process.
        ``page=False`` says its seeds are no pages for a crawl with ``recrawl=`` (a sitemap, a feed, an
        API listing read afresh each time): their state is not kept, and they are never revisits.
        """
        if (tag is None) == (path is None):
            raise ConfigError("give a handler exactly one of a tag or path=")

        def register(fn: F) -> F:
            handler = Handler.of(fn, blocks=blocks, local=local, page=page)
            if tag is not None:
                if tag in self._tags:
                    raise ConfigError(f"tag {tag!r} already has a handler: {self._tags[tag].fn.__qualname__}")
                self._tags[tag] = handler
            elif path is not None:
                if any(existing == path for existing, _, _ in self._paths):
                    raise ConfigError(f"path {path!r} already has a handler")
                self._paths.append((path, re.compile(fnmatch.translate(path)), handler))
            return fn

        return register

    def default(self, fn: F) -> F:
        """Register the handler for untagged seeds no path matches.

        A tagged seed goes to its tag's handler only: a tag no handler names is a ``ConfigError``
        (a typo), with or without a default.
        """
        if self._default is not None:
            raise ConfigError(f"the router already has a default handler: {self._default.fn.__qualname__}")
        self._default = Handler.of(fn)
        return fn

    def failed(self, fn: F) -> F:
        """Register a hook that sees each seed that failed for good (parameters are extractors; ``Error``)."""
        if self._failed is not None:
            raise ConfigError("the router already has a failed hook")
        self._failed = Handler.of(fn)
        return fn

    def middleware(self, fn: Middleware) -> Middleware:
        """Register middleware ``async (ctx, call_next) -> Outcome | None``; the first registered runs outermost."""
        self._middleware.append(fn)
        self._chain = None
        return fn

    def route(self, ctx: Context) -> Handler:
        """The handler for ``ctx.seed``; ``ConfigError`` when there is none."""
        seed = ctx.seed
        found = self._find(seed)
        if found is not None:
            return found
        if seed.tag is not None:
            raise ConfigError(unknown_tag(seed.tag, self._tags), url=seed.url)
        raise ConfigError("no handler for untagged seeds on this path and no default handler", url=seed.url)

    def _find(self, seed: Seed) -> Handler | None:
        if seed.tag is not None:
            return self._tags.get(seed.tag)  # a tag no handler names is a typo, never the default's
        if self._paths:
            path = seed.url.split("://", 1)[-1]
            slash = path.find("/")
            path = "/" if slash < 0 else path[slash:].split("?", 1)[0]
            for _, pattern, handler in self._paths:
                if pattern.match(path):
                    return handler
        return self._default

    def check_tag(self, tag: str | None) -> None:
        """Raise ``ConfigError`` when seeds tagged ``tag`` would find no handler.

        A default handler takes untagged seeds only, so it excuses no tag. The message names the
        tags the router knows and the closest one to ``tag``.
        """
        if tag is None or tag in self._tags:
            return
        raise ConfigError(unknown_tag(tag, self._tags))

    def runs_here(self, seed: Seed) -> bool:
        """Whether ``seed``'s handler runs in the crawl's own process with ``processes=N`` too."""
        found = self._find(seed)
        return found is not None and found.local

    def is_page(self, seed: Seed) -> bool:
        """Whether ``seed`` fetches a page a crawl with ``recrawl=`` keeps (its handler's ``page=``)."""
        found = self._find(seed)
        return found is None or found.page

    def describe(self, seed: Seed) -> str:
        """The name of the handler that runs for ``seed``, for log messages."""
        found = self._find(seed)
        return found.name if found is not None else "(no handler)"

    async def _dispatch(self, ctx: Context) -> OutcomeValue | None:
        handler = self.route(ctx)
        result = await handler(ctx)
        if result is not None and not isinstance(result, _OUTCOMES):
            raise ConfigError(f"handler {handler.name} returned {returned(result)}")
        return result

    def _build_chain(self) -> Next:
        chain: Next = self._dispatch
        for middleware in reversed(self._middleware):

            def wrap(ctx: Context, _mw: Middleware = middleware, _next: Next = chain) -> Awaitable[Any]:
                return _mw(ctx, _next)

            chain = wrap
        return chain

    async def handle(self, ctx: Context) -> OutcomeValue | None:
        """Run the middleware chain and the routed handler for one seed."""
        if self._chain is None:
            self._chain = self._build_chain()
        return await self._chain(ctx)

    async def handle_failed(self, ctx: Context) -> None:
        """Run the failed hook, if any, for a seed that failed for good (``ctx.error`` says why)."""
        if self._failed is not None:
            await self._failed(ctx)
