"""The example bookshop: a fixed catalogue from a seeded generator, rendered to HTML on request.

    shop = Shop()                       # the same 300 books, 12 categories, every time
    page = shop.render("/", origin="http://127.0.0.1:8000")
    page.status, page.content_type, page.body

Pages are plain server-rendered HTML with the quirks a real shop has: relative and absolute links,
truncated titles on listings, a rating spelled as a CSS class, a footer link that 404s, a mailto:
link, fragment links, a link to another site (``http://example.invalid/``, which a crawl must never
fetch), ``<link rel=canonical>``, JSON-LD product data, ``robots.txt`` and ``sitemap.xml``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import random
import re
import unicodedata
from collections.abc import Callable
from decimal import Decimal
from html import escape
from typing import Final

__all__ = ["RATING_WORDS", "Book", "Category", "Page", "Shop"]

#: Ratings are spelled out in a CSS class, as ``<p class="star-rating Four">``.
RATING_WORDS: Final = ("Zero", "One", "Two", "Three", "Four", "Five")
#: Where the footer's broken link points: a page the shop never had.
BROKEN_PATH: Final = "/gift-cards.html"
OFF_SITE_URL: Final = "http://example.invalid/"
CONTACT_EMAIL: Final = "orders@bookshop.invalid"
PER_PAGE: Final = 15
LISTING_TITLE_CHARS: Final = 28

_CATEGORIES = (
    "Mystery",
    "Science Fiction",
    "Fantasy",
    "Historical Fiction",
    "Poetry",
    "Travel",
    "Cookery",
    "History",
    "Popular Science",
    "Biography",
    "Children's",
    "Philosophy",
)
_ADJECTIVES = (
    "Silent", "Hidden", "Broken", "Golden", "Last", "Crimson", "Distant", "Quiet", "Wandering", "Winter",
    "Burning", "Forgotten", "Secret", "Paper", "Salt", "Iron", "Velvet", "Northern", "Midnight", "Glass",
)  # fmt: skip
_NOUNS = (
    "Orchard", "Harbour", "Lantern", "Cartographer", "Garden", "Archive", "Tide", "Meridian", "Kingdom",
    "Library", "Compass", "Observatory", "River", "Lighthouse", "Chorus", "Atlas", "Orchid", "Café",
    "Clockmaker", "Estuary",
)  # fmt: skip
_TITLE_PATTERNS = (
    "The {adj} {noun}",
    "A {noun} of {noun2}s",
    "Letters from the {adj} {noun}",
    "{noun} & {noun2}",
    "The {noun}'s Daughter",
    "Notes on the {adj} {noun}",
    "Beyond the {noun}",
    "The {adj} {noun}: A Novel",
    "How to Read a {noun}",
    "{adj} {noun}s and Other Stories",
)
_FIRST_NAMES = (
    "Ada", "Bruno", "Chiara", "Dmitri", "Eleanor", "Farah", "Gustav", "Hana", "Ines", "Jonas", "Kwame",
    "Lucía", "Mateo", "Noor", "Oskar", "Priya", "Rafael", "Sofia", "Tomasz", "Zoë",
)  # fmt: skip
_LAST_NAMES = (
    "Abernathy", "Bianchi", "Castellanos", "Dąbrowski", "Eriksen", "Fontaine", "Gallagher", "Haddad",
    "Ishikawa", "Jovanović", "Kowalczyk", "Lindqvist", "Moreau", "Nakamura", "O'Brien", "Petrov",
)  # fmt: skip
_SENTENCES = (
    "{author} returns with a story about {topic}.",
    "Set between two wars, it follows a family that keeps a {noun} alive against the odds.",
    "Part memoir and part field guide, it is the book {author} spent a decade writing.",
    'Critics called it "quietly astonishing" and readers have agreed ever since.',
    "Every chapter opens with a map, and every map hides a small lie.",
    "It is funny, sharp and, in its last pages, unexpectedly tender.",
    "A {adj} meditation on {topic}, told in short chapters.",
    "Includes notes, an index and a reading list for the curious.",
    "The first edition sold out in a week; this is the revised second edition.",
    "Perfect for a long train journey, or a short winter.",
)
_TOPICS = ("memory", "the sea", "lost letters", "small towns", "old recipes", "the night sky", "maps", "grief")
_INFO_PAGES = {
    "/info/about.html": (
        "About the shop",
        "We are a small independent bookshop. This site is generated for spire's examples: every book, "
        "price and review on it is invented.",
    ),
    "/info/delivery.html": (
        "Delivery and returns",
        "Orders ship within two working days. Returns are accepted within thirty days of delivery.",
    ),
}


def slugify(text: str) -> str:
    """A URL slug: ASCII, lower case, words joined by hyphens."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower().replace("'", "")).strip("-")


@dataclasses.dataclass(frozen=True, slots=True)
class Category:
    """A shelf of books, listed over one or more pages."""

    name: str
    slug: str
    book_ids: tuple[int, ...]

    @property
    def pages(self) -> int:
        return max(1, math.ceil(len(self.book_ids) / PER_PAGE))

    def page_path(self, number: int) -> str:
        """The path of listing page ``number`` (from 1)."""
        leaf = "index.html" if number == 1 else f"page-{number}.html"
        return f"/category/{self.slug}/{leaf}"


@dataclasses.dataclass(frozen=True, slots=True)
class Book:
    """One book as the shop knows it: the ground truth a crawl's items are checked against."""

    id: int
    title: str
    author: str
    category: str
    price: Decimal
    rating: int
    stock: int
    upc: str
    description: str
    related: tuple[int, ...]

    @property
    def slug(self) -> str:
        return f"{slugify(self.title)}_{self.id}"

    @property
    def path(self) -> str:
        return f"/books/{self.slug}.html"

    @property
    def in_stock(self) -> bool:
        return self.stock > 0

    @property
    def availability(self) -> str:
        return f"In stock ({self.stock} available)" if self.stock else "Out of stock"


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """A rendered response."""

    status: int
    content_type: str
    body: bytes


#: Renders one page for the origin the shop is served at.
_Route = Callable[[str], Page]


class Shop:
    """The catalogue: ``books`` in id order, ``categories`` in menu order, all from ``seed``."""

    def __init__(self, *, seed: int = 2024, books: int = 300) -> None:
        rng = random.Random(seed)
        weights = [rng.uniform(0.5, 1.5) for _ in _CATEGORIES]
        category_of = rng.choices(range(len(_CATEGORIES)), weights=weights, k=books)
        titles: set[str] = set()
        self.books: list[Book] = []
        for book_id in range(1, books + 1):
            title = _title(rng)
            while title in titles:
                title = _title(rng)
            titles.add(title)
            author = f"{rng.choice(_FIRST_NAMES)} {rng.choice(_LAST_NAMES)}"
            self.books.append(
                Book(
                    id=book_id,
                    title=title,
                    author=author,
                    category=_CATEGORIES[category_of[book_id - 1]],
                    price=Decimal(rng.randrange(499, 5999)).scaleb(-2),
                    rating=rng.randint(1, 5),
                    stock=0 if rng.random() < 0.15 else rng.randint(1, 22),
                    upc=f"{rng.getrandbits(64):016x}",
                    description=_description(rng, author),
                    related=tuple(rng.sample([i for i in range(1, books + 1) if i != book_id], 4)),
                )
            )
        self.categories = [
            Category(name, slugify(name), tuple(b.id for b in self.books if b.category == name)) for name in _CATEGORIES
        ]
        self.featured = tuple(rng.sample(range(1, books + 1), 8))
        self._routes = self._route_table()

    def book(self, book_id: int) -> Book:
        return self.books[book_id - 1]

    def category(self, name: str) -> Category:
        return next(c for c in self.categories if c.name == name)

    def paths(self) -> list[str]:
        """Every page the shop serves with status 200, in sitemap order."""
        return list(self._routes)

    def listing_paths(self) -> list[str]:
        return [c.page_path(n) for c in self.categories for n in range(1, c.pages + 1)]

    def render(self, path: str, *, origin: str) -> Page:
        """The response for ``path`` (query ignored) on a shop served at ``origin``."""
        path = path.split("?", 1)[0].split("#", 1)[0]
        route = self._routes.get(path)
        if route is None:
            html = _Layout(self, origin, "/404", "Page not found").html(
                '<h1>Page not found</h1><p>Try the <a href="/">home page</a>.</p>'
            )
            return Page(404, "text/html; charset=utf-8", html.encode())
        return route(origin)

    # -- routes -----------------------------------------------------------------------------------

    def _route_table(self) -> dict[str, _Route]:
        routes: dict[str, _Route] = {"/": self._home}
        for path in _INFO_PAGES:
            routes[path] = functools.partial(self._info, path)
        for category in self.categories:
            for number in range(1, category.pages + 1):
                routes[category.page_path(number)] = functools.partial(self._listing, category, number)
        for book in self.books:
            routes[book.path] = functools.partial(self._book_page, book)
        routes["/cart/"] = self._cart
        routes["/robots.txt"] = self._robots
        routes["/sitemap.xml"] = self._sitemap
        routes["/static/style.css"] = self._css
        return routes

    def _home(self, origin: str) -> Page:
        layout = _Layout(self, origin, "/", "Spire Books: an independent bookshop")
        pods = "".join(_pod(self.book(i), "") for i in self.featured)
        main = (
            "<h1>Welcome to Spire Books</h1>"
            f"<p>{len(self.books)} books on {len(self.categories)} shelves. Browse a shelf on the left, "
            "or start with a few of our favourites.</p>"
            f'<section class="featured"><h2>Featured</h2><ol class="row">{pods}</ol></section>'
        )
        return layout.page(main)

    def _info(self, path: str, origin: str) -> Page:
        title, text = _INFO_PAGES[path]
        main = f"<h1>{escape(title)}</h1><p>{escape(text)}</p>"
        return _Layout(self, origin, path, title).page(main, crumbs=[(title, None)])

    def _listing(self, category: Category, number: int, origin: str) -> Page:
        path = category.page_path(number)
        ids = category.book_ids[(number - 1) * PER_PAGE : number * PER_PAGE]
        pods = "".join(_pod(self.book(i), "../../") for i in ids)
        pager = []
        if number > 1:
            previous = "index.html" if number == 2 else f"page-{number - 1}.html"
            pager.append(f'<li class="previous"><a href="{previous}">previous</a></li>')
        pager.append(f'<li class="current">Page {number} of {category.pages}</li>')
        if number < category.pages:
            pager.append(f'<li class="next"><a href="page-{number + 1}.html">next</a></li>')
        first = (number - 1) * PER_PAGE + 1
        main = (
            f"<h1>{escape(category.name)}</h1>"
            f'<form class="form-horizontal"><strong>{len(category.book_ids)}</strong> results - showing '
            f"<strong>{first}</strong> to <strong>{first + len(ids) - 1}</strong>.</form>"
            f'<ol class="row">{pods}</ol>'
            f'<ul class="pager">{"".join(pager)}</ul>'
        )
        title = category.name if number == 1 else f"{category.name}, page {number}"
        return _Layout(self, origin, path, title).page(main, crumbs=[(category.name, None)])

    def _book_page(self, book: Book, origin: str) -> Page:
        category = self.category(book.category)
        related = []
        for n, other_id in enumerate(book.related):
            other = self.book(other_id)
            href = f"{other.slug}.html" + ("#reviews" if n == 0 else "")  # a fragment a crawler must drop
            related.append(f'<li><a href="{href}">{escape(other.title)}</a></li>')
        rows = (
            ("UPC", book.upc),
            ("Author", book.author),
            ("Price (excl. tax)", f"£{book.price}"),
            ("Tax", "£0.00"),
            ("Availability", book.availability),
        )
        table = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
        stars = RATING_WORDS[book.rating]
        main = (
            '<article class="product_page"><div class="product_main">'
            f"<h1>{escape(book.title)}</h1>"
            f'<p class="author">by <span>{escape(book.author)}</span></p>'
            f'<p class="price_color">£{book.price}</p>'
            f'<p class="instock availability">{escape(book.availability)}</p>'
            f'<p class="star-rating {stars}">{"★" * book.rating}{"☆" * (5 - book.rating)}</p>'
            '<p><a href="#product_description">Read the description</a> · '
            '<a href="/cart/">Add to basket</a></p>'
            "</div>"
            '<div id="product_description" class="sub-header"><h2>Product Description</h2></div>'
            f'<p class="description">{escape(book.description)}</p>'
            f'<h2>Product Information</h2><table class="table table-striped">{table}</table>'
            f'<section id="reviews"><h2>Reviews</h2><p>No reviews yet.</p></section>'
            f'<section class="related"><h2>You might also like</h2><ul>{"".join(related)}</ul></section>'
            "</article>"
        )
        crumbs = [(category.name, f"../category/{category.slug}/index.html"), (book.title, None)]
        head = _json_ld(_product_ld(book, origin)) + _json_ld(_crumbs_ld(["Home", category.name, book.title]))
        return _Layout(self, origin, book.path, book.title).page(main, crumbs=crumbs, head=head)

    def _cart(self, origin: str) -> Page:
        main = "<h1>Basket</h1><p>Your basket is empty.</p>"
        return _Layout(self, origin, "/cart/", "Basket").page(main, crumbs=[("Basket", None)])

    def _robots(self, origin: str) -> Page:
        text = f"User-agent: *\nDisallow: /cart/\n\nSitemap: {origin}/sitemap.xml\n"
        return Page(200, "text/plain; charset=utf-8", text.encode())

    def _css(self, origin: str) -> Page:
        return Page(200, "text/css; charset=utf-8", _CSS.encode())

    def _sitemap(self, origin: str) -> Page:
        entries = "".join(
            f"  <url><loc>{escape(origin + path)}</loc><lastmod>2024-05-01</lastmod></url>\n"
            for path in self._routes
            if path.endswith(("/", ".html")) and path != "/cart/"
        )
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{entries}</urlset>\n'
        )
        return Page(200, "application/xml; charset=utf-8", xml.encode())


class _Layout:
    """The frame every HTML page shares: head with canonical link, header nav, shelves, footer."""

    def __init__(self, shop: Shop, origin: str, path: str, title: str) -> None:
        self.shop = shop
        self.origin = origin
        self.path = path
        self.title = title

    def page(self, main: str, *, crumbs: list[tuple[str, str | None]] | None = None, head: str = "") -> Page:
        return Page(200, "text/html; charset=utf-8", self.html(main, crumbs=crumbs, head=head).encode())

    def html(self, main: str, *, crumbs: list[tuple[str, str | None]] | None = None, head: str = "") -> str:
        shelves = "".join(
            # absolute links, the way a CMS writes menus
            f'<li><a href="{self.origin}{c.page_path(1)}">{escape(c.name)}</a></li>'
            for c in self.shop.categories
        )
        trail = ""
        if crumbs is not None:
            items = ['<li><a href="/">Home</a></li>']
            for text, href in crumbs:
                inner = escape(text) if href is None else f'<a href="{href}">{escape(text)}</a>'
                items.append(f"<li{' class=active' if href is None else ''}>{inner}</li>")
            trail = f'<ul class="breadcrumb">{"".join(items)}</ul>'
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{escape(self.title)} | Spire Books</title>\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<link rel="canonical" href="{self.origin}{self.path}">\n'
            '<link rel="stylesheet" href="/static/style.css">\n'
            f"{head}</head>\n<body>\n"
            '<a id="top"></a>'
            '<header><a class="brand" href="/">Spire Books</a><nav class="site"><ul>'
            '<li><a href="/">Home</a></li><li><a href="/info/about.html">About</a></li>'
            '<li><a href="/info/delivery.html">Delivery</a></li><li><a href="/cart/">Basket</a></li>'
            "</ul></nav></header>\n"
            f'<div class="page"><aside><h2>Shelves</h2><nav class="categories"><ul>{shelves}</ul></nav></aside>\n'
            f"<main>{trail}{main}</main></div>\n"
            "<footer><ul>"
            f'<li><a href="{BROKEN_PATH}">Gift cards</a></li>'
            f'<li><a href="mailto:{CONTACT_EMAIL}">Contact us</a></li>'
            f'<li><a href="{OFF_SITE_URL}" rel="external">Our publisher</a></li>'
            '<li><a href="/sitemap.xml">Sitemap</a></li>'
            '<li><a href="#top">Back to top</a></li>'
            "</ul><p>© 2024 Spire Books. Every book here is invented.</p></footer>\n"
            "</body>\n</html>\n"
        )


def _pod(book: Book, up: str) -> str:
    """A book's card on a listing; ``up`` climbs from the listing's directory to the site root."""
    short = book.title if len(book.title) <= LISTING_TITLE_CHARS else book.title[: LISTING_TITLE_CHARS - 3] + "..."
    return (
        '<li><article class="product_pod">'
        f'<h3><a href="{up}books/{book.slug}.html" title="{escape(book.title)}">{escape(short)}</a></h3>'
        f'<p class="star-rating {RATING_WORDS[book.rating]}"></p>'
        f'<p class="price_color">£{book.price}</p>'
        f'<p class="instock availability">{"In stock" if book.in_stock else "Out of stock"}</p>'
        "</article></li>"
    )


def _product_ld(book: Book, origin: str) -> dict[str, object]:
    stock = "InStock" if book.in_stock else "OutOfStock"
    return {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": book.title,
        "sku": book.upc,
        "url": origin + book.path,
        "author": {"@type": "Person", "name": book.author},
        "offers": {
            "@type": "Offer",
            "price": str(book.price),
            "priceCurrency": "GBP",
            "availability": f"https://schema.org/{stock}",
        },
        "aggregateRating": {"@type": "AggregateRating", "ratingValue": book.rating, "bestRating": 5},
    }


def _crumbs_ld(names: list[str]) -> dict[str, object]:
    return {
        "@context": "https://schema.org",
        "@type": "BreadcrumbList",
        "itemListElement": [
            {"@type": "ListItem", "position": n, "name": name} for n, name in enumerate(names, start=1)
        ],
    }


def _json_ld(data: dict[str, object]) -> str:
    # "</" inside a script would end it early; JSON allows escaping the slash
    payload = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/ld+json">{payload}</script>\n'


def _title(rng: random.Random) -> str:
    noun, noun2 = rng.sample(_NOUNS, 2)
    return rng.choice(_TITLE_PATTERNS).format(adj=rng.choice(_ADJECTIVES), noun=noun, noun2=noun2)


def _description(rng: random.Random, author: str) -> str:
    sentences = rng.sample(_SENTENCES, rng.randint(3, 5))
    noun, adj, topic = rng.choice(_NOUNS).lower(), rng.choice(_ADJECTIVES).lower(), rng.choice(_TOPICS)
    return " ".join(s.format(author=author, topic=topic, noun=noun, adj=adj) for s in sentences)


_CSS = """\
body { font-family: Georgia, serif; margin: 0; color: #222; }
header, footer { background: #2b3a42; color: #fff; padding: 0.5em 1em; }
header a, footer a { color: #fff; }
header ul, footer ul, .breadcrumb, .pager { list-style: none; display: flex; gap: 1em; padding: 0; }
.page { display: flex; gap: 2em; padding: 1em; }
aside { min-width: 12em; }
ol.row { list-style: none; display: grid; grid-template-columns: repeat(4, 1fr); gap: 1em; padding: 0; }
.product_pod { border: 1px solid #ddd; padding: 0.5em; }
.price_color { color: #3c763d; font-weight: bold; }
.star-rating { color: #e6a700; }
"""
