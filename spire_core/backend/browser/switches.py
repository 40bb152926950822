"""The command line every Chromium of spire starts with: a crawler's browser sends only the crawl's requests.

Chromium's own services reach out on their own schedule: the network-time query
(``clients2.google.com``), component updates and on-demand model manifests
(``update.googleapis.com``), Google account checks (``accounts.google.com/ListAccounts``),
optimization hints (``optimizationguide-pa.googleapis.com``), the new-tab page of a third-party
default search engine (``start.duckduckgo.com`` on Debian), safe browsing, domain reliability,
sync, field trials, translation, the media router. ``--disable-background-networking`` and
``--disable-component-update`` stop only some of them, so each is switched off by name.

Two of them have no switch that turns them off in the Chromium Debian ships (156): the account
checks and the on-demand component updates. Their endpoints are pointed at ``NOWHERE``, a URL
Chromium refuses to send to (port 0 is an unsafe port), so each fails inside the browser
(``ERR_UNSAFE_PORT``) before a socket opens, through a proxy or not.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

__all__ = ["CHROMIUM_FLAGS", "DISABLED_FEATURES", "NOWHERE", "STARTUP_PREFS", "host_rules", "merged_features"]

#: A URL Chromium never requests: port 0 is refused before any connection is made.
NOWHERE = "http://127.0.0.1:0"

#: Preferences every profile starts with: open ``about:blank`` at startup (otherwise Chromium opens
#: its new-tab page, which for a non-Google default search engine loads that engine's own page;
#: chromedriver passes no start URL through), and Safe Browsing off.
STARTUP_PREFS = {
    "session.restore_on_startup": 4,
    "session.startup_urls": ["about:blank"],
    "safebrowsing.enabled": False,  # no Safe Browsing lookups of the pages visited
}

#: Chromium features switched off, each a service that sends requests of its own.
DISABLED_FEATURES = (
    "AutofillServerCommunication",  # form-field predictions from the autofill server
    "CertificateTransparencyComponentUpdater",
    "DialMediaRouteProvider",  # casting discovery
    "InterestFeedContentSuggestions",
    "MediaRouter",
    "NetworkTimeServiceQuerying",  # clients2.google.com/time/1/current
    "OptimizationGuideModelDownloading",
    "OptimizationHints",  # optimizationguide-pa.googleapis.com
    "OptimizationHintsFetching",
    "OptimizationTargetPrediction",
    "PreconnectToSearch",  # a preconnect to the default search engine
    "Translate",
)

#: Switches every driver starts with. The ``headless``, profile, proxy and user-agent ones are
#: added per launch.
CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    f"--component-updater=url-source={NOWHERE}",  # on-demand updates ignore the switch above
    f"--gaia-url={NOWHERE}",  # account checks (ListAccounts) have no switch of their own
    "--disable-sync",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--safebrowsing-disable-auto-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-component-extensions-with-background-pages",
    "--disable-field-trial-config",  # no field-trial (variations) configuration
    f"--variations-server-url={NOWHERE}",  # nor a variations seed fetched for one
    "--disable-search-engine-choice-screen",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--metrics-recording-only",  # metrics recorded, never uploaded
    "--no-pings",  # no hyperlink-auditing pings
    "--media-router=0",
    "--password-store=basic",
    "--use-mock-keychain",
)


def merged_features(given: Iterable[str]) -> str:
    """One ``--disable-features`` switch: ``DISABLED_FEATURES`` and those the user's options name.

    Chromium reads only the last ``--disable-features``, so a user's own must be joined, not added.
    """
    names = list(DISABLED_FEATURES)
    for argument in given:
        if argument.startswith("--disable-features="):
            names += [name for name in argument.split("=", 1)[1].split(",") if name and name not in names]
    return "--disable-features=" + ",".join(names)


def host_rules(resolve_only: Collection[str]) -> str:
    """``--host-resolver-rules`` under which every host name but ``resolve_only`` fails to resolve.

    A request for any other name fails as ``net::ERR_NAME_NOT_RESOLVED`` without a DNS query. Through
    a proxy the proxy resolves the names, so there the rules cover only the proxy's own address.
    """
    excluded = "".join(f", EXCLUDE {host}" for host in sorted(resolve_only))
    return f"--host-resolver-rules=MAP * ~NOTFOUND{excluded}"
