"""Keep secrets out of text that tunegate records or prints.

Two kinds of secret reach text by accident:

* the API key, when a server echoes the request's ``Authorization`` header in an error body
  (``HTTP 401: invalid key: Bearer sk-...``): :func:`mask_secrets` replaces it wherever it
  appears, in any letter case, and in the encodings a server may apply before echoing it
  (percent-encoding, a JSON string's escapes), so ``Bearer <key>`` becomes ``Bearer ***``;
* a password in a storage URL (``postgresql://user:secret@host/db``, ``...?password=...``):
  :func:`url_holds_password` says whether there is one and :func:`mask_url_password` masks it.
  Query keys are compared decoded and in any case (``?PassWord=``, ``?pass%77ord=``), and the
  user part reaches up to the *last* ``@`` the way a database URL parser reads it (a password
  may hold ``@``, ``/``, ``?`` or ``#``), so what is masked is never less than what a driver
  would send.

Masking happens before any cut (``text[:500]``), so a cut can never leave half a key; text that
was already cut where it was read says so (``cut=True``) and loses a trailing partial key too.
This module is upstream of everything that prints or records server text (loadgen, servers,
tuner, results, cli).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, unquote_plus

__all__ = ["MASK", "mask_secrets", "mask_url_password", "url_holds_password", "url_password"]

MASK = "***"
"""What a secret is replaced with."""

_USERINFO_PASSWORD = re.compile(r"^(?P<head>[A-Za-z][\w+.-]*://[^:/@]*:)(?P<secret>.*)@", re.S)
"""``scheme://user:`` then everything up to the last ``@``: greedy, so a password holding
``@`` (or ``/``, ``?``, ``#``, which a database URL parser also lets through) is masked whole."""

_SECRET_KEY = re.compile(r"password|passwd|secret|token|api_?key|credential|(?:^|_)(?:pwd|pass)$")
"""A query key (decoded, lower case) whose value is a secret: ``password``, ``sslpassword``,
``PassWord``, ``passwd``, ``pwd``, ``pass``, ``secret``, ``token``, ``api_key``... but not
``passfile`` (libpq's path to a password file, the recommended way)."""


def _forms(secret: str) -> set[str]:
    """The ways a server may echo ``secret``: as sent, percent-encoded, JSON-escaped."""
    escaped = json.dumps(secret)[1:-1]
    return {secret, quote(secret, safe=""), quote(secret), quote_plus(secret), escaped,
            escaped.replace("/", "\\/")}


def mask_secrets(text: str, secrets: Iterable[str | None], *, cut: bool = False) -> str:
    """``text`` with every occurrence of each secret replaced by :data:`MASK`.

    Matching ignores letter case and also finds the percent-encoded and JSON-escaped forms.
    Empty or ``None`` secrets are ignored.

    Args:
        text: What a server sent, or a message built from it.
        secrets: The values to mask (the API key, tokens).
        cut: ``text`` was cut off at its end where it was read: a trailing prefix of a secret
            (half a key) is masked too.

    Example:
        >>> mask_secrets("HTTP 401: invalid key: bearer SK-ABC (sk-abc)", ["sk-abc"])
        'HTTP 401: invalid key: bearer *** (***)'
        >>> mask_secrets('{"detail": "got sk-a', ["sk-abc"], cut=True)
        '{"detail": "got ***'
    """
    forms = sorted({f for s in secrets if s for f in _forms(s)}, key=len, reverse=True)
    if not forms or not text:
        return text
    text = re.sub("|".join(re.escape(f) for f in forms), MASK, text, flags=re.IGNORECASE)
    if cut:
        folded = text.casefold()
        tail = max((n for f in forms for n in range(1, len(f))
                    if folded.endswith(f[:n].casefold())), default=0)
        if tail:
            text = text[:-tail] + MASK
    return text


def _secret_query_values(query: str) -> list[tuple[int, int]]:
    """Spans (in ``query``) of the values whose decoded key names a secret."""
    spans = []
    start = 0
    for piece in re.split(r"[&;]", query):
        key, sep, _ = piece.partition("=")
        if sep and _SECRET_KEY.search(unquote_plus(key).strip().lower()):
            spans.append((start + len(key) + 1, start + len(piece)))
        start += len(piece) + 1
    return spans


def _split(url: str) -> tuple[str, str, str]:
    """``(head, secret, rest)``: ``head`` ends with ``user:``; ``secret`` is empty when the URL
    has no user password."""
    match = _USERINFO_PASSWORD.match(url)
    if match is None:
        return "", "", url
    return match.group("head"), match.group("secret"), url[match.end("secret"):]


def url_password(url: str) -> str | None:
    """The password of ``url``'s user part, read the way :func:`mask_url_password` reads it
    (also from a URL too malformed for :func:`urllib.parse.urlsplit`), to mask it elsewhere.

    Example:
        >>> url_password("http://tuner:s3@cr3t@[::1:8000/v1"), url_password("http://h:1/v1")
        ('s3@cr3t', None)
    """
    return _split(url)[1] or None


def url_holds_password(url: str) -> bool:
    """Whether ``url`` carries a password: ``user:PASSWORD@`` or a secret-named query key.

    Example:
        >>> [url_holds_password(u) for u in ("postgresql://tuner@db/x",
        ...     "postgresql://tuner@db/x?PassWord=s", "postgresql://db/x?pass%77ord=s",
        ...     "postgresql://db/x?passfile=/home/tuner/.pgpass")]
        [False, True, True, False]
    """
    head, _, rest = _split(url)
    if head:
        return True
    _, question, query = rest.partition("?")
    return bool(question) and bool(_secret_query_values(query))


def mask_url_password(url: str) -> str:
    """``url`` with its user password and every secret query value replaced by :data:`MASK`.

    Example:
        >>> mask_url_password("postgresql://tuner:p@ss/w@db/x?sslmode=require&PWD=s3&a=1")
        'postgresql://tuner:***@db/x?sslmode=require&PWD=***&a=1'
    """
    head, secret, rest = _split(url)
    if secret:
        head += MASK
    before, question, query = rest.partition("?")
    if question:
        for begin, end in reversed(_secret_query_values(query)):
            query = query[:begin] + MASK + query[end:]
    return head + before + question + query
