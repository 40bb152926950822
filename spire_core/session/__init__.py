"""The settings every crawl of a session shares: timeouts, retries, proxies, identities, the request log, metrics."""

from spire_core.session.timeouts import Timeouts

__all__ = ["Timeouts"]
