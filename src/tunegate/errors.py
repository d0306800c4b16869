"""One exception tree for everything tunegate raises on purpose.

::

    TunegateError                 root; the CLI turns any of these into a message, never a traceback
    ├── UsageError                the user asked for something impossible (exit code 2)
    │   ├── ConfigError           a config value is invalid: names the field, the value and the fix
    │   └── InputFileError        a file the user gave cannot be read: names the file and the line
    ├── TokenizerError            a named tokenizer cannot be loaded offline
    ├── SSEError                  the byte stream is not acceptable Server-Sent Events
    │   └── SSELineTooLongError   one SSE line exceeded the parser's memory bound
    ├── ServerError               a server tunegate starts itself failed (loopback, simulator)
    ├── LeaseError                the one-run-per-service lease (tuner/lease.py)
    │   ├── LeaseBusyError        another live run holds it: names host, pid and since when
    │   └── LeaseLostError        another holder took over: a write with a stale epoch is refused
    └── JournalCorruptError       a journal is damaged before its last line: names file and line

User-facing messages say what went wrong, where (file, field, request) and what to do.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "InputFileError",
    "JournalCorruptError",
    "LeaseBusyError",
    "LeaseError",
    "LeaseLostError",
    "SSEError",
    "SSELineTooLongError",
    "ServerError",
    "TokenizerError",
    "TunegateError",
    "UsageError",
]


class TunegateError(Exception):
    """Root of every error tunegate raises deliberately."""

    exit_code: int = 1


class UsageError(TunegateError):
    """The request cannot be carried out as asked; the user must change it."""

    exit_code = 2


class ConfigError(UsageError):
    """An invalid configuration value (flag, config file field)."""


class InputFileError(UsageError):
    """A user-supplied file is missing, unreadable or malformed."""


class TokenizerError(UsageError):
    """A tokenizer the user named cannot be loaded without network access."""


class SSEError(TunegateError):
    """The response body violates the Server-Sent Events framing tunegate can accept."""


class SSELineTooLongError(SSEError):
    """A single SSE line grew past the parser's bound without a line terminator."""


class ServerError(TunegateError):
    """A server process that tunegate manages failed to start or to answer."""


class LeaseError(TunegateError):
    """The one-tuning-run-per-service lease could not be held."""


class LeaseBusyError(LeaseError):
    """Another live run holds the service's lease; the message names its host, pid and start."""


class LeaseLostError(LeaseError):
    """Another holder took the lease over; durable writes with the old epoch are refused."""


class JournalCorruptError(TunegateError):
    """A journal line before the last is damaged; the message names the file and the line."""
