"""``--http2``, ``--http3 [MODE]``, ``--ca-bundle FILE`` and ``--insecure``: how a command's requests
speak HTTP, the same for ``spire crawl`` and ``spire run``; they are ``HttpBackend``'s ``http2=``,
``http3=`` and ``verify=``.

    spire crawl https://example.com/ -o pages.jsonl --http2
    spire crawl https://example.com/ -o pages.jsonl --http3 only
    spire crawl https://intranet.example/ -o pages.jsonl --ca-bundle company-ca.pem
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from spire_core.backend.http import HttpBackend
from spire_core.errors import ConfigError

__all__ = ["add_protocol_arguments", "backend_options", "http_backend"]

#: ``--http3`` modes: ``HttpBackend(http3=...)``'s.
HTTP3_MODES = ("alt-svc", "prefer", "only")


def add_protocol_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the HTTP version and certificate options to ``parser``."""
    group = parser.add_argument_group("HTTP versions and certificates")
    group.add_argument(
        "--http2", action="store_true", help="speak HTTP/2 where the server offers it (needs spire-crawl[http2])"
    )
    group.add_argument(
        "--http3",
        nargs="?",
        const="alt-svc",
        default=None,
        choices=HTTP3_MODES,
        metavar="MODE",
        help="speak HTTP/3 over QUIC (needs spire-crawl[http3]): alt-svc (the default mode) where a server's "
        "Alt-Svc header offers it, prefer to try it first, only for HTTP/3 and nothing else",
    )
    trust = group.add_mutually_exclusive_group()
    trust.add_argument(
        "--ca-bundle",
        type=Path,
        default=None,
        metavar="FILE",
        help="trust the certificate authorities in this PEM file instead of the public ones",
    )
    trust.add_argument(
        "--insecure", action="store_true", help="check no certificate (a test server's own; never for a real site)"
    )


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``HttpBackend`` keywords the options name; empty when none was given."""
    options: dict[str, Any] = {}
    if args.http2:
        options["http2"] = True
    if args.http3 is not None:
        options["http3"] = args.http3
    if args.ca_bundle is not None:
        if not args.ca_bundle.is_file():
            raise ConfigError(f"--ca-bundle {args.ca_bundle}: no such file")
        options["verify"] = str(args.ca_bundle)
    elif args.insecure:
        options["verify"] = False
    return options


def http_backend(args: argparse.Namespace, **more: Any) -> HttpBackend | None:
    """The ``HttpBackend`` the options describe (with ``more`` keywords), or ``None`` when none was given
    (the command's own default backend)."""
    options = backend_options(args)
    return HttpBackend(**options, **more) if options else None
