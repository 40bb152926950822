"""The benchmark's web server: nginx on 127.0.0.x with a config of ours under ``benchmarks/.work``.

    python benchmarks/serve.py start     # write the config and the polite sites, start or reload nginx
    python benchmarks/serve.py stop

Sites (keep-alive on, one worker process, sendfile, no gzip):

- ``http://127.0.0.1:8631/postgresql/`` serves ``postgresql-doc-15`` (the PostgreSQL manual);
- ``http://127.0.0.1:8632/scipy/`` serves ``python-scipy-doc`` (the SciPy docs);
- ``http://127.0.0.{2..41}:8633/`` serve 40 copies of a generated site (an index linking to every
  page, each page linking on to the next two), for the polite multi-host scenario. Each host has its
  own address, not only its own port, because Scrapy keys its per-domain limits by host name.

Every request is logged to ``.work/nginx/access.log`` as ``time duration addr:port status uri``, so a run can be
checked for pages fetched twice, and a polite run for the spacing of its requests.

Standard library only: it runs under any Python 3.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
NGINX = WORK / "nginx"
POLITE = WORK / "polite"
ACCESS_LOG = NGINX / "access.log"


@dataclass(frozen=True)
class DocSite:
    name: str
    port: int
    folder: str  # URL path, ends in /
    root: Path  # on disk

    @property
    def start(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.folder}index.html"

    @property
    def prefix(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.folder}"


SITES = (
    DocSite("postgresql", 8631, "/postgresql/", Path("/usr/share/doc/postgresql-doc-15/html")),
    DocSite("scipy", 8632, "/scipy/", Path("/usr/share/doc/python-scipy-doc/html")),
)
POLITE_PORT = 8633
POLITE_HOSTS = tuple(f"127.0.0.{n}" for n in range(2, 42))


def polite_starts(hosts: int = len(POLITE_HOSTS)) -> list[str]:
    return [f"http://{host}:{POLITE_PORT}/index.html" for host in POLITE_HOSTS[:hosts]]


def write_polite_site(pages: int) -> None:
    """An index linking to every page; page i links to the index and to pages i+1 and i+2."""
    marker = POLITE / f".pages-{pages}"
    if marker.exists():
        return
    POLITE.mkdir(parents=True, exist_ok=True)
    for old in POLITE.iterdir():
        old.unlink()
    items = "".join(f'<li><a href="p{i}.html">page {i}</a></li>\n' for i in range(pages))
    (POLITE / "index.html").write_text(
        f"<html><head><title>index</title></head><body><ul>\n{items}</ul></body></html>\n"
    )
    for i in range(pages):
        onward = "".join(f'<a href="p{j}.html">page {j}</a> ' for j in (i + 1, i + 2) if j < pages)
        (POLITE / f"p{i}.html").write_text(
            f"<html><head><title>page {i}</title></head><body><p>Page {i}.</p>"
            f'<a href="index.html">index</a> {onward}</body></html>\n'
        )
    marker.touch()


def config() -> str:
    servers = []
    for site in SITES:
        servers.append(
            f"""
    server {{
        listen 127.0.0.1:{site.port};
        location {site.folder} {{ alias {site.root}/; }}
    }}"""
        )
    listens = "\n".join(f"        listen {host}:{POLITE_PORT};" for host in POLITE_HOSTS)
    servers.append(
        f"""
    server {{
{listens}
        root {POLITE};
    }}"""
    )
    temp = "\n".join(
        f"    {kind}_temp_path {NGINX}/tmp-{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""# Written by benchmarks/serve.py; edits are overwritten.
worker_processes 1;
pid {NGINX}/nginx.pid;
error_log {NGINX}/error.log warn;
{"user root;" if os.geteuid() == 0 else ""}
events {{ worker_connections 4096; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    gzip off;
    log_format bench '$msec $request_time $server_addr:$server_port $status $request_uri';
    access_log {ACCESS_LOG} bench;
{temp}
{"".join(servers)}
}}
"""


def _pid() -> int | None:
    try:
        pid = int((NGINX / "nginx.pid").read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def _nginx(*args: str) -> None:
    subprocess.run(
        ["nginx", "-p", str(NGINX), "-c", str(NGINX / "nginx.conf"), "-e", str(NGINX / "error.log"), *args],
        check=True,
    )


def start(polite_pages: int = 200) -> None:
    """Write the config and polite site; start nginx, or reload it when it already runs."""
    for site in SITES:
        if not (site.root / "index.html").is_file():
            sys.exit(f"{site.root}/index.html is missing: run benchmarks/setup.sh first")
    NGINX.mkdir(parents=True, exist_ok=True)
    write_polite_site(polite_pages)
    (NGINX / "nginx.conf").write_text(config())
    _nginx("-t", "-q")
    if _pid() is None:
        _nginx()
    else:
        _nginx("-s", "reload")
    wait_until_up()


def wait_until_up(timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    urls = [site.start for site in SITES] + polite_starts()[:1] + polite_starts()[-1:]
    for url in urls:
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    response.read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit(f"nginx does not answer {url}; see {NGINX}/error.log")
                time.sleep(0.1)


def stop() -> None:
    pid = _pid()
    if pid is not None:
        os.kill(pid, signal.SIGQUIT)


def main() -> None:
    parser = argparse.ArgumentParser(description="start or stop the benchmark's nginx")
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--polite-pages", type=int, default=200, help="pages per polite host (default 200)")
    args = parser.parse_args()
    if args.action == "start":
        start(args.polite_pages)
        print(f"nginx serving {', '.join(site.prefix for site in SITES)} and {len(POLITE_HOSTS)} polite hosts")
    else:
        stop()


if __name__ == "__main__":
    main()
