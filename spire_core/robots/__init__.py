"""robots.txt (RFC 9309): the rules for one agent, fetched per origin, cached and refreshed, and the engine's gate.

    rules = await robots("https://shop.example/", "examplebot")
    if rules.allows(url) and rules.allows_use(url, Purpose.AI_TRAIN):
        ...
    rules.crawl_delay(), rules.sitemaps()

One role a module: the rules read from a file's text, on protego (``rules``); what one response to
a robots.txt request means (``answer``); the fetching cache, its refresh, retries of an unreachable
file and RFC 9309's redirects (``cache``); the engine's gate and the crawl's ``RobotsPolicy``
(``gate``).
"""

from spire_core.robots.answer import RobotsAnswer, robots_answer
from spire_core.robots.cache import RobotsCache, robots
from spire_core.robots.gate import KnownRobots, RobotsGate, RobotsPolicy
from spire_core.robots.rules import MAX_CRAWL_DELAY, MAX_ROBOTS_BYTES, Purpose, Robots, product_token
from spire_core.url import is_robots_txt

__all__ = [
    "MAX_CRAWL_DELAY",
    "MAX_ROBOTS_BYTES",
    "KnownRobots",
    "Purpose",
    "Robots",
    "RobotsAnswer",
    "RobotsCache",
    "RobotsGate",
    "RobotsPolicy",
    "is_robots_txt",
    "product_token",
    "robots",
    "robots_answer",
]
