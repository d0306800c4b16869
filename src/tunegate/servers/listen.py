"""Where a server that tunegate starts may listen, checked before anything starts.

``tunegate loopback`` and ``tunegate sim serve`` take ``--host`` and ``--port``. Left to the
socket layer, a port out of range is an ``OverflowError`` from ``bind()``, a host that does not
resolve a ``gaierror``, and ``[::1`` or ``http://[::1`` the same: tracebacks, or a one-line
failure only after the simulator has "loaded its model". Checked here first, each is one
:class:`~tunegate.errors.ConfigError` naming the flag and the value (exit 2). A host that
resolves but is not this machine's still fails at ``bind()``, as the server's own error.
"""

from __future__ import annotations

import socket

from tunegate.errors import ConfigError

__all__ = ["check_listen_address", "url_host"]

_EXAMPLE = "e.g. 127.0.0.1, ::1 or localhost"


def check_listen_address(host: str, port: int) -> str:
    """The host to bind (IPv6 brackets removed), once ``host`` and ``port`` are usable.

    Args:
        host: ``--host``: a name or address of this machine; ``[::1]`` is accepted as ``::1``.
        port: ``--port``: 0 (any free port) to 65535.

    Raises:
        ConfigError: The port is out of range, the host is a URL, a malformed IPv6 address, or
            does not resolve.

    Example:
        >>> check_listen_address("[::1]", 0)
        '::1'
    """
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port}: out of range; give 1-65535, or 0 for any free port")
    shown = repr(host)
    if not host.strip():
        raise ConfigError(f"--host {shown}: empty; give a host name or address ({_EXAMPLE})")
    if "://" in host or "/" in host:
        raise ConfigError(f"--host {shown}: a host name or address, not a URL ({_EXAMPLE})")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if "[" in bare or "]" in bare:
        raise ConfigError(f"--host {shown}: malformed IPv6 address (unbalanced brackets); "
                          "write it as ::1 or [::1]")
    try:
        socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        why = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise ConfigError(f"--host {shown}: cannot be resolved ({why}); give a name or "
                          f"address of this machine ({_EXAMPLE})") from None
    return bare


def url_host(host: str) -> str:
    """``host`` as it appears in a URL: an IPv6 address in brackets.

    Example:
        >>> url_host("::1"), url_host("127.0.0.1")
        ('[::1]', '127.0.0.1')
    """
    return f"[{host}]" if ":" in host else host
