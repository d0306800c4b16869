"""Which resources an HTML document would fetch from elsewhere: the report must fetch none.

Reads every attribute that makes a browser load something (``src``, ``href`` on a ``<link>``,
``srcset``, ``poster``, ``data``, ``action``, ``formaction``) and every ``url(...)`` and
``@import`` in inline styles, and returns those naming another host or scheme (``http:``,
``https:``, ``ws:``, ``//host``, ``ftp:``). A link a person may click (``<a href>``) is not a
request and is not listed. Text inside scripts is not a resource either: plotly.js carries
URL strings it never fetches for the chart types a report draws (and the page's
Content-Security-Policy would refuse them if it tried).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["remote_resources"]

_LOADING = {"src", "srcset", "poster", "data", "action", "formaction", "background"}
_REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)
_LOCAL = re.compile(r"^\s*(?:data|blob|about|javascript):", re.IGNORECASE)
_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.IGNORECASE)


def _remote(url: str) -> bool:
    return bool(_REMOTE.match(url)) and not _LOCAL.match(url)


class _Resources(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        for name, value in attrs:
            if value is None:
                continue
            loads = name in _LOADING or (name == "href" and tag in ("link", "base", "image"))
            if loads and any(_remote(part.split()[0]) for part in value.split(",")
                             if part.strip()):
                self.found.append(f"<{tag} {name}={value!r}>")
            if name == "style":
                self._css(value)

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self._css(data)

    def _css(self, text: str) -> None:
        for match in _CSS_URL.finditer(text):
            url = match.group(1) or match.group(2)
            if url and _remote(url):
                self.found.append(f"css {url!r}")


def remote_resources(html: str) -> list[str]:
    """Every resource in ``html`` that a browser would fetch from the network."""
    parser = _Resources()
    parser.feed(html)
    parser.close()
    return parser.found
