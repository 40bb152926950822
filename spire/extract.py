"""Extractors: what a handler's parameters ask for, resolved from their annotations.

    @router.handler("book")
    async def book(page: Html, url: Url, books: Dataset[Book]) -> None: ...

Each extractor runs at most once per request, and the fetch behind them at most once: the first
parameter that needs the response fetches it, the others share it. A handler whose parameters need
no response (``Url``, ``SeedInfo``, ``Links``, a ``Dataset``) causes no fetch at all.

A user's own extractor is a class with one async method, used through ``Annotated``:

    class Title(Extractor[str]):
        async def extract(self, ctx: Context) -> str:
            page = await resolve(ctx, Html)
            return page.css("title::text").get(default="")

    async def handler(title: Annotated[str, Title()]) -> None: ...
"""

from __future__ import annotations

import abc
import inspect
import json
import sys
import typing
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar, get_args, get_origin

from pydantic import BaseModel

from spire.links import Links
from spire_core import html
from spire_core.context import Context
from spire_core.dataset.base import Dataset
from spire_core.errors import ConfigError, DecodeError
from spire_core.response import Response
from spire_core.robots import Robots
from spire_core.seed import Seed
from spire_core.session import streaming

if TYPE_CHECKING:
    from parsel import Selector

    from spire_core.backend.browser.driver import AsyncDriver

__all__ = [
    "BodyStream",
    "Directives",
    "DirectivesFor",
    "Driver",
    "Error",
    "Extractor",
    "Html",
    "Json",
    "RobotsRules",
    "SeedInfo",
    "Text",
    "Url",
    "analyse",
    "resolve",
]

T = TypeVar("T")
M = TypeVar("M")


class Extractor(abc.ABC, Generic[T]):
    """Produces one handler argument from the request's ``Context``. Results are cached per request."""

    @abc.abstractmethod
    async def extract(self, ctx: Context) -> T:
        """The value for the parameter."""

    def key(self) -> Hashable:
        """The per-request cache key: extractors with equal keys run once between them."""
        return self

    def requires(self) -> tuple[Any, ...]:
        """The extractors (or annotations naming them) this one reads through ``resolve``.

        Declared so that the whole tree is checked when a handler using it is registered: a
        dependency spire cannot extract, or a cycle, is a ``ConfigError`` at decoration, not on the
        first page. They still run lazily, at most once per request, when ``extract`` asks for them.
        """
        return ()


class _Response(Extractor[Response]):
    async def extract(self, ctx: Context) -> Response:
        return await ctx.response()

    def key(self) -> Hashable:
        return _Response


class _Html(Extractor["Selector"]):
    def requires(self) -> tuple[Any, ...]:
        return (Response,)

    async def extract(self, ctx: Context) -> Selector:
        page: Selector = await ctx.document()  # parsed once a request, a recrawl's fingerprint included
        return page

    def key(self) -> Hashable:
        return _Html


#: The extractor behind ``Html``, for the extractors here that read the page (``Html`` itself is built
#: on first use: it names parsel's ``Selector``, and ``import spire`` leaves parsel alone).
_HTML = _Html()


class _Text(Extractor[str]):
    def requires(self) -> tuple[Any, ...]:
        return (
            Response,
            _HTML,
        )

    async def extract(self, ctx: Context) -> str:
        response = await ctx.response()
        content_type = response.content_type
        if content_type is None or "html" in content_type:
            return html.text(await resolve(ctx, _HTML))
        return response.text

    def key(self) -> Hashable:
        return _Text


class _Json(Extractor[Any]):
    def requires(self) -> tuple[Any, ...]:
        return (Response,)

    async def extract(self, ctx: Context) -> Any:
        response = await ctx.response()
        try:
            return json.loads(response.body)
        except ValueError as exc:
            raise DecodeError(f"the body is not JSON: {exc}", url=response.url) from None

    def key(self) -> Hashable:
        return _Json


class _Url(Extractor[str]):
    async def extract(self, ctx: Context) -> str:
        return ctx.seed.url

    def key(self) -> Hashable:
        return _Url


class _Seed(Extractor[Seed]):
    async def extract(self, ctx: Context) -> Seed:
        return ctx.seed

    def key(self) -> Hashable:
        return _Seed


class _Context(Extractor[Context]):
    async def extract(self, ctx: Context) -> Context:
        return ctx

    def key(self) -> Hashable:
        return _Context


class _Links(Extractor[Links]):
    """The request's link queue; its selectors read the request's one parsed page (``Html``)."""

    def requires(self) -> tuple[Any, ...]:
        return (_HTML,)

    async def extract(self, ctx: Context) -> Links:
        async def page() -> Selector:
            parsed: Selector = await resolve(ctx, _HTML)
            return parsed

        return Links(ctx, page)

    def key(self) -> Hashable:
        return _Links


class DirectivesFor(Extractor[html.Directives]):
    """The page's robots directives for one agent, from its meta tags and ``X-Robots-Tag`` headers.

        async def handler(rules: Annotated[Directives, DirectivesFor("mybot")]) -> None: ...

    A ``<meta>`` named ``robots`` or named for the agent applies, and so does an ``X-Robots-Tag``
    value unless it names another agent. A body that is not HTML is not parsed: only its headers count.
    """

    def __init__(self, agent: str = "*") -> None:
        self.agent = agent

    def requires(self) -> tuple[Any, ...]:
        return (
            Response,
            _HTML,
        )

    async def extract(self, ctx: Context) -> html.Directives:
        response = await ctx.response()
        content_type = response.content_type
        # A PDF or an image carries its rules in X-Robots-Tag alone; parsing it as HTML would be waste.
        document = await resolve(ctx, _HTML) if content_type is None or "html" in content_type else None
        return html.Directives.read(document, response.headers, self.agent)

    def key(self) -> Hashable:
        return (DirectivesFor, self.agent)

    def __repr__(self) -> str:
        return f"DirectivesFor({self.agent!r})"


class _RobotsRules(Extractor[Robots | None]):
    """The crawl's robots.txt rules for the seed's origin, as the engine read them (no fetch)."""

    async def extract(self, ctx: Context) -> Robots | None:
        return ctx.robots.rules(ctx.seed.url) if ctx.robots is not None else None

    def key(self) -> Hashable:
        return _RobotsRules


class _Error(Extractor[BaseException | None]):
    """The error a seed failed with, in a failed hook; ``None`` in a handler."""

    async def extract(self, ctx: Context) -> BaseException | None:
        return ctx.error

    def key(self) -> Hashable:
        return _Error


class _Driver(Extractor["AsyncDriver"]):
    """The browser tab the page was loaded in, lent to the request while the session that loaded it is open."""

    def requires(self) -> tuple[Any, ...]:
        return (Response,)

    async def extract(self, ctx: Context) -> AsyncDriver:
        # Imported here, not at the top: a crawl that never asks for a Driver never imports the backends.
        from spire_core.backend.adaptive import AdaptiveBackend
        from spire_core.backend.browser.backend import BrowserBackend

        backend = ctx.backend
        if not isinstance(backend, BrowserBackend | AdaptiveBackend):
            raise ConfigError(
                f"a Driver parameter needs Crawler(backend=BrowserBackend()) or AdaptiveBackend, "
                f"not {type(backend).__name__}",
                url=ctx.seed.url,
            )
        return backend.driver_for(await ctx.response())

    def key(self) -> Hashable:
        return _Driver


_DRIVER = _Driver()


class _BodyStream(Extractor[streaming.BodyStream]):
    """The body as a stream: the request keeps its host slot until the body ends, fails or is dropped.

    Read it with ``async for chunk in body``, ``await body.read()`` or ``await body.copy_decoded_to(path)``;
    what is left unread when the handler returns is dropped. A body another parameter has read whole
    already (``Html``, ``Response``, or a backend that cannot stream) is served from memory.
    """

    async def extract(self, ctx: Context) -> streaming.BodyStream:
        with streaming.streamed():
            response = await ctx.response()
        if isinstance(response, streaming.StreamedResponse):
            return response.stream
        return streaming.BodyStream.of(response)

    def key(self) -> Hashable:
        return _BodyStream


class StagedDataset(Generic[M]):
    """A handler's view of a dataset: items are validated now and written when the handler succeeds."""

    def __init__(self, ctx: Context, dataset: Dataset[Any]) -> None:
        self._ctx = ctx
        self.dataset = dataset
        self.model = dataset.model

    def validate(self, items: Any) -> list[Any]:
        return self.dataset.validate(items)

    async def push(self, items: Any) -> int:
        """Validate ``items`` (one or many, models or dicts) and stage them; return how many."""
        batch = self.dataset.validate(items)
        self._ctx.stage(self.dataset, batch)
        return len(batch)

    def __aiter__(self) -> Any:
        return self.dataset.__aiter__()

    async def export(self, path: Any, format: Any = "jsonl") -> int:
        return await self.dataset.export(path, format)

    async def aclose(self) -> None:
        """The crawl closes its datasets."""


class _Dataset(Extractor[Any]):
    def __init__(self, model: type[Any]) -> None:
        self.model = model

    async def extract(self, ctx: Context) -> StagedDataset[Any]:
        return StagedDataset(ctx, ctx.dataset(self.model))

    def key(self) -> Hashable:
        return (_Dataset, self.model)


#: The body as a stream, one decoded chunk at a time, holding the host slot until it ends (``copy_decoded_to``).
BodyStream = Annotated[streaming.BodyStream, _BodyStream()]
#: The readable text of the page (one block per line), or the decoded body when it is not HTML.
Text = Annotated[str, _Text()]
#: The body parsed as JSON.
Json = Annotated[Any, _Json()]
#: The seed's URL, as written (no fetch).
Url = Annotated[str, _Url()]
#: The ``Seed`` being handled (no fetch).
SeedInfo = Annotated[Seed, _Seed()]
#: The robots.txt rules of the seed's origin as the crawl read them (``None`` with ``robots=False``); no fetch.
RobotsRules = Annotated[Robots | None, _RobotsRules()]
#: The error a seed failed with, for ``@router.failed`` hooks.
Error = Annotated[BaseException | None, _Error()]
#: The page's robots directives (meta robots and ``X-Robots-Tag``) for every agent (``*``);
#: ``Annotated[Directives, DirectivesFor("mybot")]`` reads them for one agent.
Directives = Annotated[html.Directives, DirectivesFor()]

if TYPE_CHECKING:
    #: The parsed page, a parsel ``Selector``.
    Html = Annotated[Selector, _HTML]
    #: The browser tab holding the page, to click and wait in (``BrowserBackend`` only).
    Driver = Annotated[AsyncDriver, _DRIVER]
else:

    def __getattr__(name: str) -> Any:
        """``Html`` and ``Driver``, built on first use: they name classes of parsel and of the browser
        backend, which ``import spire`` leaves alone."""
        if name == "Html":
            from parsel import Selector

            value = Annotated[Selector, _HTML]
        elif name == "Driver":
            from spire_core.backend.browser.driver import AsyncDriver

            value = Annotated[AsyncDriver, _DRIVER]
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value  # built once: later lookups never reach this function
        return value


_BARE: dict[Any, Extractor[Any]] = {
    Response: _Response(),
    Seed: _Seed(),
    Context: _Context(),
    Links: _Links(),
    streaming.BodyStream: _BodyStream(),
    html.Directives: DirectivesFor(),
}
#: The classes of modules ``import spire`` leaves alone, by module and name: an annotation can only
#: be one of them once its module is loaded, so they are looked up in ``sys.modules``.
_BARE_ELSEWHERE: dict[tuple[str, str], Extractor[Any]] = {
    ("parsel", "Selector"): _HTML,
    ("spire_core.backend.browser.driver", "AsyncDriver"): _DRIVER,
}


def _bare(annotation: Any) -> Extractor[Any] | None:
    """The extractor for an annotation that is a class spire extracts itself (``Selector``, ``Response``...)."""
    found = _BARE.get(annotation)
    if found is None and isinstance(annotation, type):
        for (module, name), extractor in _BARE_ELSEWHERE.items():
            loaded = sys.modules.get(module)
            if loaded is not None and getattr(loaded, name, None) is annotation:
                return extractor
    return found


def extractor_for(annotation: Any, *, where: str = "") -> Extractor[Any]:
    """The extractor an annotation names; ``ConfigError`` when it names none."""
    if get_origin(annotation) is Annotated:
        for meta in reversed(get_args(annotation)[1:]):
            if isinstance(meta, Extractor):
                return meta
        annotation = get_args(annotation)[0]
    if isinstance(annotation, Extractor):
        return annotation
    found = _bare(annotation)
    if found is not None:
        return found
    origin = get_origin(annotation)
    if origin is Dataset or origin is StagedDataset:
        (model,) = get_args(annotation)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigError(f"{where}: Dataset[{model!r}] needs a pydantic model: Dataset[YourModel(BaseModel)]")
        return _Dataset(model)
    if isinstance(annotation, type) and issubclass(annotation, Extractor):
        raise ConfigError(f"{where}: annotate with an instance, Annotated[T, {annotation.__name__}()]")
    raise ConfigError(
        f"{where}: {annotation!r} is not something spire can extract; use Html, Text, Json, Url, "
        "SeedInfo, Response, BodyStream, Links, Directives, Dataset[Model], or Annotated[T, YourExtractor()]"
    )


def analyse(fn: Callable[..., Any]) -> list[tuple[str, Extractor[Any]]]:
    """``(parameter, extractor)`` for each parameter of ``fn``, checked once, when it is registered.

    String annotations (``from __future__ import annotations``) resolve in ``fn``'s module globals.
    """
    where = getattr(fn, "__qualname__", repr(fn))
    if not inspect.iscoroutinefunction(fn):
        raise ConfigError(f"{where}: a handler must be an async function")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise ConfigError(
            f"{where}: cannot resolve an annotation ({exc}): with `from __future__ import annotations`, "
            "annotations are looked up in the handler's module, so define the model or extractor at module "
            "level (or drop that import where an annotation uses a local value)"
        ) from exc
    except Exception as exc:
        raise ConfigError(f"{where}: cannot read its annotations: {exc}") from exc
    resolved: list[tuple[str, Extractor[Any]]] = []
    for name, parameter in inspect.signature(fn).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ConfigError(f"{where}: *{name} parameters cannot be extracted")
        if name not in hints:
            raise ConfigError(f"{where}: parameter {name!r} has no annotation")
        extractor = extractor_for(hints[name], where=f"{where}({name})")
        _check_requirements(extractor, f"{where}({name})", ())
        resolved.append((name, extractor))
    return resolved


def _check_requirements(extractor: Extractor[Any], where: str, chain: tuple[Extractor[Any], ...]) -> None:
    """Walk ``extractor``'s declared dependencies: each must name an extractor, and none may loop."""
    for earlier in chain:
        if _same_extractor(earlier, extractor):
            cycle = " -> ".join(_name(part) for part in (*chain[chain.index(earlier) :], extractor))
            raise ConfigError(
                f"{where}: extractor {_name(extractor)} depends on itself through {cycle}; "
                "an extractor's requires() must not lead back to it"
            )
    for wanted in extractor.requires():
        found = wanted if isinstance(wanted, Extractor) else extractor_for(wanted, where=f"{where} needs")
        _check_requirements(found, where, (*chain, extractor))


def _same_extractor(a: Extractor[Any], b: Extractor[Any]) -> bool:
    """Whether ``a`` and ``b`` are one extractor: equal keys, or, for extractors keyed by identity (the
    default ``key()``), one class with equal attributes: ``requires()`` builds a fresh instance each
    time, and A() -> B() -> A() is a cycle all the same."""
    if a.key() == b.key():
        return True
    if type(a) is not type(b) or a.key() is not a or b.key() is not b:
        return False
    return bool(vars(a) == vars(b)) if hasattr(a, "__dict__") and hasattr(b, "__dict__") else False


def _name(extractor: Extractor[Any]) -> str:
    """An extractor as an error names it: its repr when it has one of its own, else its class's name."""
    if type(extractor).__repr__ is object.__repr__:
        return f"{type(extractor).__name__}()"
    return repr(extractor)


async def resolve(ctx: Context, wanted: Any) -> Any:
    """Run an extractor (or the one an annotation names) for ``ctx``, at most once per request."""
    extractor = wanted if isinstance(wanted, Extractor) else extractor_for(wanted)
    key = extractor.key()
    cache = ctx.cache
    if key in cache:
        return cache[key]
    value = cache[key] = await extractor.extract(ctx)
    return value
