"""A polite crawler for one documentation site: same host only, robots.txt respected, every
request through the SSRF-guarded client of ``services.ssrf`` (redirects are followed by hand so
an off-site or private redirect target is refused before any request is sent there; the guard
re-checks every hop it does send). Pages are decoded like ``services.webfetch`` does.
"""

from __future__ import annotations

import logging
import time
import urllib.robotparser
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urldefrag, urljoin, urlsplit

from .chunking import Document
from .errors import KnowledgeError

if TYPE_CHECKING:
    import httpx

    from ..config import Settings

log = logging.getLogger(__name__)

DEFAULT_MAX_PAGES = 50
MAX_REDIRECTS = 5
MAX_CRAWL_DELAY = 5.0
ROBOTS_AGENT = "idee-notebook-agent"
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = {"text/markdown": "markdown", "text/x-markdown": "markdown", "text/plain": "text"}
_SKIP_SUFFIXES = [
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".svg",
    ".webp",
    ".ico",
    ".pdf",
    ".zip",
    ".gz",
    ".tgz",
    ".tar",
    ".rar",
    ".7z",
    ".mp4",
    ".mp3",
    ".avi",
    ".mov",
    ".woff",
    ".woff2",
    ".ttf",
    ".eot",
    ".css",
    ".js",
    ".json",
    ".xml",
    ".tif",
    ".tiff",
    ".jar",
    ".exe",
    ".dmg",
    ".apk",
    ".doc",
    ".docx",
    ".xls",
    ".xlsx",
    ".ppt",
    ".pptx",
    ".kml",
    ".kmz",
    ".shp",
]


@dataclass
class CrawlReport:
    """What the crawl did: pages kept, and what was skipped and why."""

    pages: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    robots_disallowed: list[str] = field(default_factory=list)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.netloc or "").lower()


def _normalise(url: str) -> str:
    url, _ = urldefrag(url)
    parts = urlsplit(url)
    path = parts.path or "/"
    return parts._replace(path=path, netloc=parts.netloc.lower()).geturl()


def _links(html: str, base: str) -> list[str]:
    import lxml.html

    try:
        doc = lxml.html.document_fromstring(html)
    except Exception:
        return []
    base_href = doc.xpath("//base/@href")
    if base_href:
        base = urljoin(base, str(base_href[0]))
    out: list[str] = []
    for anchor in doc.xpath("//a[@href]"):
        if "nofollow" in (anchor.get("rel") or "").lower():
            continue
        href = (anchor.get("href") or "").strip()
        if not href or href.startswith(("mailto:", "javascript:", "tel:", "#")):
            continue
        out.append(_normalise(urljoin(base, href)))
    return out


class SiteCrawler:
    """Breadth-first crawl of one site, yielding a ``Document`` per page."""

    def __init__(
        self,
        start_url: str,
        settings: Settings,
        *,
        max_pages: int = DEFAULT_MAX_PAGES,
        progress: bool = False,
    ) -> None:
        from ..services.ssrf import check_url

        if max_pages < 1:
            raise KnowledgeError("--max-pages debe ser al menos 1.")
        check_url(start_url, settings)  # a clear error before anything else
        self.start_url = _normalise(start_url)
        self.scheme, self.host = _origin(self.start_url)
        self.settings = settings
        self.max_pages = max_pages
        self.progress = progress
        self.report = CrawlReport()
        self._robots: urllib.robotparser.RobotFileParser | None = None
        self._delay = 0.0

    # ------------------------------------------------------------------ public
    def documents(self) -> Iterator[Document]:
        from tqdm.auto import tqdm

        from ..services.ssrf import guarded_client

        queue: deque[str] = deque([self.start_url])
        seen = {self.start_url}
        crawled: set[str] = set()
        bar = tqdm(total=self.max_pages, desc="Rastreando", unit="pág", disable=not self.progress)
        with guarded_client(self.settings, follow_redirects=False) as client:
            self._load_robots(client)
            while queue and len(self.report.pages) < self.max_pages:
                url = queue.popleft()
                if not self._allowed(url):
                    self.report.robots_disallowed.append(url)
                    continue
                if self._delay and self.report.pages:
                    time.sleep(self._delay)
                page = self._fetch(client, url)
                if page is None:
                    continue
                final_url, content_type, text = page
                if final_url in crawled:  # a redirect to a page already read
                    continue
                seen.add(final_url)
                crawled.add(final_url)
                self.report.pages.append(final_url)
                bar.update(1)
                if content_type == "html":
                    from .markup_splitters import html_title

                    for link in _links(text, final_url):
                        if link not in seen and self._in_scope(link):
                            seen.add(link)
                            queue.append(link)
                    yield Document(text, final_url, "html", html_title(text))
                else:
                    yield Document(text, final_url, content_type)
        bar.close()

    # ------------------------------------------------------------------ internals
    def _in_scope(self, url: str) -> bool:
        scheme, host = _origin(url)
        if host != self.host or scheme not in ("http", "https"):
            return False
        path = urlsplit(url).path.lower()
        return not path.endswith(tuple(_SKIP_SUFFIXES))

    def _allowed(self, url: str) -> bool:
        return self._robots is None or self._robots.can_fetch(ROBOTS_AGENT, url)

    def _load_robots(self, client: httpx.Client) -> None:
        """robots.txt of the site (RFC 9309: missing ⇒ all allowed; server error ⇒ none)."""
        import httpx

        robots_url = f"{self.scheme}://{self.host}/robots.txt"
        parser = urllib.robotparser.RobotFileParser(robots_url)
        try:
            reply = client.get(robots_url)
        except httpx.HTTPError as exc:
            log.warning(
                "No se pudo leer %s (%s): se asume que no hay restricciones", robots_url, exc
            )
            self._robots = None
            return
        if reply.status_code >= 500:
            raise KnowledgeError(
                f"{robots_url} respondió {reply.status_code}: por cortesía no se rastrea el sitio "
                "mientras su robots.txt no esté disponible. Reintenta más tarde."
            )
        if reply.status_code >= 400 or reply.status_code in (301, 302, 303, 307, 308):
            self._robots = None
            return
        parser.parse(reply.text.splitlines())
        self._robots = parser
        delay = parser.crawl_delay(ROBOTS_AGENT)
        self._delay = min(float(delay), MAX_CRAWL_DELAY) if delay else 0.0

    def _fetch(self, client: httpx.Client, url: str) -> tuple[str, str, str] | None:
        """(final URL, kind, text) of a page, or None (reason kept in the report)."""
        import httpx

        from ..errors import ServiceError
        from ..services.webfetch import decode  # charset from the header or <meta charset>

        current = url
        for _ in range(MAX_REDIRECTS + 1):
            try:
                with client.stream("GET", current) as reply:
                    if reply.is_redirect:
                        target = _normalise(urljoin(current, reply.headers.get("location", "")))
                        if not self._in_scope(target):
                            self._skip(url, f"redirige fuera del sitio ({target})")
                            return None
                        if not self._allowed(target):
                            self.report.robots_disallowed.append(target)
                            return None
                        current = target
                        continue
                    if reply.status_code != 200:
                        self._skip(url, f"HTTP {reply.status_code}")
                        return None
                    kind = self._kind(reply.headers.get("content-type", ""))
                    if kind is None:
                        self._skip(url, f"tipo {reply.headers.get('content-type', '?')}")
                        return None
                    body = self._read_capped(reply)
                    if body is None:
                        self._skip(url, "demasiado grande")
                        return None
                    content_type = reply.headers.get("content-type", "")
                    return current, kind, decode(body, content_type)
            except ServiceError as exc:  # the SSRF guard refused this hop
                self._skip(url, str(exc))
                log.warning("Página omitida %s: %s", url, exc)
                return None
            except httpx.HTTPError as exc:
                self._skip(url, f"error de red: {exc}")
                return None
        self._skip(url, "demasiadas redirecciones")
        return None

    def _kind(self, content_type: str) -> str | None:
        mime = content_type.split(";", 1)[0].strip().lower()
        if mime in _HTML_TYPES:
            return "html"
        return _TEXT_TYPES.get(mime)

    def _read_capped(self, reply: httpx.Response) -> bytes | None:
        limit = self.settings.fetch_max_bytes
        data = bytearray()
        for part in reply.iter_bytes():
            data.extend(part)
            if len(data) > limit:
                return None
        return bytes(data)

    def _skip(self, url: str, reason: str) -> None:
        self.report.skipped[url] = reason
