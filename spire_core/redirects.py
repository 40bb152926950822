"""Redirects admitted like links: each hop of a redirect chain passes the crawl's admission.

The crawler follows redirects itself, hop by hop. ``Redirects.next_hop`` turns a 3xx into the seed of
its target once that target passes what a link would: an http(s) URL, within ``max_redirects``, the
crawl's strategy (a start seed may go anywhere its redirects lead), robots.txt (read for the target's
origin if it was not known yet), and a unique key nobody queued or fetched before (claimed in the
frontier's seen set, so a page also linked is handled once). A retry of the seed may take the hops
its earlier attempt claimed: that attempt may have failed on the very hop it claimed. A hop that
fails is ``RedirectRefused`` with the ``SkipReason`` the crawl counts. Credentials stay behind when a
hop leaves the seed's origin.

A browser's tab may move on after its page loaded (a script's timer, a handler's click):
``Redirects.navigation`` judges each such move as a link of the page the tab holds, before the
browser sends it (``session.navigations``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from spire_core import url as urls
from spire_core.admission import Admission, RequestBudget, Scope
from spire_core.errors import SpireError
from spire_core.log import logger
from spire_core.response import Response
from spire_core.robots import RobotsGate
from spire_core.seed import Seed
from spire_core.session.addresses import AddressPolicy, PrivateAddress
from spire_core.session.credentials import CREDENTIAL_HEADERS
from spire_core.skips import SkipReason

__all__ = ["RedirectRefused", "Redirects", "redirected"]

#: How many claimed hop targets the crawl remembers with the seed that claimed them, for that seed's
#: retry; past it the oldest are forgotten (a retry comes within its backoff, long before).
REMEMBERED_HOPS = 10_000

log = logger("crawler")

#: How a strategy named by a string relates two URLs (``all`` relates any two).
_RELATED = {"same_domain": urls.same_domain, "same_hostname": urls.same_hostname, "same_origin": urls.same_origin}


class RedirectRefused(BaseException):
    """A redirect hop failed admission: the seed ends as a counted skip (``reason``), not a failure.

    Control flow, not an error: it derives from ``BaseException``, as cancellation does, so a
    handler's ``except Exception`` around its fetch lets it through to the engine.
    """

    def __init__(self, reason: SkipReason) -> None:
        super().__init__(reason)
        self.reason = reason


def redirected(seed: Seed, target: str, status: int, key: str) -> Seed:
    """The next hop of a redirect: 303 (and 301/302 after a POST) turn into a bodiless GET; credentials
    stay behind when the hop leaves the seed's origin."""
    headers = seed.headers
    if headers and urls.origin(target) != seed.origin:
        kept = {name: value for name, value in headers.items() if name.lower() not in CREDENTIAL_HEADERS}
        headers = kept or None
    if status == 303 or (status in (301, 302) and seed.method == "POST"):
        return dataclasses.replace(seed, url=target, method="GET", body=None, headers=headers, unique_key=key)
    return dataclasses.replace(seed, url=target, headers=headers, unique_key=key)


class Redirects:
    """The crawl's rules for redirect hops: its hop limit, its admission, its robots.txt gate and its
    request budget (each hop is one more request); and for a browser tab's moves after its page
    loaded, its address policy too (a hop's address is checked as it is sent)."""

    def __init__(
        self,
        *,
        max_redirects: int,
        admission: Admission,
        robots: RobotsGate | None,
        budget: RequestBudget | None = None,
        addresses: AddressPolicy | None = None,
    ) -> None:
        self.max_redirects = max_redirects
        self._admission = admission
        self._robots = robots
        self.budget = budget
        self._addresses = addresses
        #: Each hop target claimed lately, with the unique key of the seed whose chain claimed it.
        self._claimed_by: dict[str, str] = {}

    async def next_hop(self, seed: Seed, current: Seed, response: Response, chain: Sequence[str]) -> Seed:
        """The seed of ``response``'s target, once it passes admission; ``chain`` holds the URLs fetched
        for ``seed`` so far (its own first).

        A hop back to a URL of its own chain is a loop: a duplicate skip, but for one redirect of a
        page to itself that sets a cookie (a site's way to set one before it serves the page).
        """
        target = urls.join(current.url, response.headers["location"])
        if target is None or not target.startswith(("http://", "https://")):
            raise RedirectRefused(SkipReason.SCHEME)
        if len(chain) > self.max_redirects:
            raise RedirectRefused(SkipReason.REDIRECTS)
        try:
            key = urls.canonicalize(target)
        except SpireError:
            raise RedirectRefused(SkipReason.INVALID_URL) from None
        if _loops(chain, key, current, response):
            raise RedirectRefused(SkipReason.DUPLICATE)
        reason = self._scope(seed, target)
        if reason is not None:
            raise RedirectRefused(reason)
        robots = self._robots
        if robots is not None:
            if robots.rules(target) is None:
                await robots.read(urls.origin(target))
            reason = robots.verdict(target)
            if reason is not None:
                raise RedirectRefused(reason)
        if key != seed.unique_key and not await self._claim(seed, key):
            raise RedirectRefused(SkipReason.DUPLICATE)  # queued or fetched before: handled there, not twice
        if self.budget is not None and not self.budget.spend():
            raise RedirectRefused(SkipReason.REQUEST_BUDGET)
        return redirected(current, target, response.status, seed.unique_key)

    async def navigation(self, seed: Seed, page: str, target: str) -> bool:
        """Whether the browser tab holding ``seed``'s page, now at ``page``, may go on to ``target`` (a
        script, a refresh, a form or a handler's click, after the load).

        It is judged as a link of ``page`` would be, before anything is sent: an http(s) URL, the
        address policy, the strategy (compared with ``page``, a start page's too) and the robots.txt
        rules already known; an origin whose robots.txt was not read yet is refused, not read now
        (the browser waits on the answer). A refusal is counted and recorded as a skip of
        ``target`` found on ``page``, and logged.
        """
        reason = self._moving(seed, page, target)
        if reason is None:
            return True
        log.info("the browser's move from %s to %s was refused, not sent (%s)", page, target, reason)
        await self._admission.skipped([(target, reason)], referrer=page, depth=seed.depth + 1)
        return False

    def _moving(self, seed: Seed, page: str, target: str) -> SkipReason | None:
        """Why the tab at ``page`` may not go on to ``target``, if it may not."""
        if not target.startswith(("http://", "https://")):
            return SkipReason.SCHEME
        try:
            urls.canonicalize(target)
            if self._addresses is not None:
                self._addresses.check(Seed(target))
        except PrivateAddress:
            return SkipReason.PRIVATE_ADDRESS
        except SpireError:
            return SkipReason.INVALID_URL
        strategy: str | Scope = seed.strategy or self._admission.policy.strategy
        if isinstance(strategy, Scope):
            if not strategy.admits(target):
                return SkipReason.SCOPE
        elif strategy != "all" and not _RELATED.get(strategy, urls.same_origin)(page, target):
            return SkipReason.STRATEGY
        return self._robots.verdict(target) if self._robots is not None else None

    async def _claim(self, seed: Seed, key: str) -> bool:
        """Claim ``key`` for ``seed``'s chain: ``True`` when it is new to the crawl, or was claimed by an
        earlier attempt of ``seed`` itself (whose load of it may be what failed)."""
        claimed_by = self._claimed_by
        if not (await self._admission.claim([key]))[0]:
            return seed.attempt > 0 and claimed_by.get(key) == seed.unique_key
        if len(claimed_by) >= REMEMBERED_HOPS:
            del claimed_by[next(iter(claimed_by))]  # the oldest: its seed was retried or settled long ago
        claimed_by[key] = seed.unique_key
        return True

    def _scope(self, seed: Seed, target: str) -> SkipReason | None:
        """Whether the crawl's strategy lets ``seed`` move to ``target``: a start seed goes anywhere its
        redirects lead; a link stays within the strategy, compared with the link's own URL."""
        strategy: str | Scope = seed.strategy or self._admission.policy.strategy
        if isinstance(strategy, Scope):
            return None if strategy.redirected(seed, target) else SkipReason.SCOPE
        if seed.depth == 0 or strategy == "all":
            return None
        related = _RELATED.get(strategy, urls.same_origin)
        return None if related(seed.url, target) else SkipReason.STRATEGY


def _loops(chain: Sequence[str], key: str, current: Seed, response: Response) -> bool:
    """Whether a hop to ``key`` returns to a URL of ``chain``; one self-redirect that sets a cookie is not a loop."""
    keys = [urls.canonicalize(url) for url in chain]
    if key not in keys:
        return False
    itself = keys[-1] == key and keys.count(key) == 1 and urls.canonicalize(current.url) == key
    return not (itself and "set-cookie" in response.headers)
