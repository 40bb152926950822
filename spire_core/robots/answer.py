"""What one response to a robots.txt request means (RFC 9309): the file, no file, ask again, or ask elsewhere.

A 2xx is the file, a 4xx allows everything, a 5xx, a 429 or a failed connection is worth another
try, and a redirect names the URL to ask next.
"""

from __future__ import annotations

import dataclasses

from spire_core import url as urls
from spire_core.response import Response
from spire_core.robots.rules import MAX_ROBOTS_BYTES, Robots

__all__ = ["RobotsAnswer", "robots_answer"]


@dataclasses.dataclass(frozen=True, slots=True)
class RobotsAnswer:
    """What one response to a robots.txt request means (RFC 9309); ``robots_answer`` reads one.

    ``retry``: worth another try (a 5xx, a 429, no connection). ``redirect``: the URL to ask next.
    Otherwise the answer is final, and ``rules(agent)`` reads it.
    """

    #: The file's first 512 KiB (and a byte more, so a line cut short shows) for a 2xx; ``None``: no file.
    body: bytes | None = None
    retry: bool = False
    redirect: str | None = None
    #: Where the file was read: relative Sitemap lines are resolved against it.
    url: str | None = None

    def rules(self, agent: str = "*") -> Robots:
        """The rules for ``agent`` when nothing more is asked.

        The file's own for a 2xx; nothing allowed (unreachable) for a try that is not repeated; else
        everything allowed: a 4xx, or a redirect not followed (RFC 9309 reads too many as no file).
        """
        if self.body is not None:
            return Robots.parse(self.body, agent, url=self.url)
        if self.retry:
            return Robots.unreachable(agent)
        return Robots.allow_all(agent)


def robots_answer(response: Response | None) -> RobotsAnswer:
    """What ``response`` to a robots.txt request means; ``None`` stands for a failed connection.

    answer = robots_answer(response)
    if answer.redirect is not None:
        ...  # ask answer.redirect next
    rules = answer.rules("examplebot")
    """
    if response is None:
        return RobotsAnswer(retry=True)
    if 200 <= response.status < 300:
        # Only the first 512 KiB are read, so that is all an answer keeps.
        return RobotsAnswer(body=response.body[: MAX_ROBOTS_BYTES + 1], url=response.url)
    if response.status >= 500 or response.status == 429:
        return RobotsAnswer(retry=True)
    if response.is_redirect:
        target = urls.join(response.url, response.headers["location"])
        if target is not None and target.startswith(("http://", "https://")):
            return RobotsAnswer(redirect=target)
    return RobotsAnswer()  # a 4xx, or a redirect to nowhere: no robots.txt
