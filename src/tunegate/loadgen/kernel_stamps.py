"""Receipt times from the kernel: when the bytes reached the host, however busy the client.

A time taken in the read callback (:mod:`.receipts`) is late by however long the event loop
took to get to that socket: the other sockets' callbacks of the same ``epoll`` round, a garbage
collection, or the operating system running the server on the client's core. At 256 lock-step
streams on a two-core machine that was the whole of the client's delay after the server's write
at p99 (``benchmarks/gauge_accuracy.py``). Linux stamps every received packet as it enters the
network stack, and ``SO_TIMESTAMPNS`` hands that stamp to ``recvmsg``; for TCP it is the stamp
of the newest packet the read returned, so on a path that delivers in order a read never gets a
time earlier than any of its bytes arrived.

:class:`KernelStampedSocket` is the socket aiohttp connects through (``TCPConnector``'s public
``socket_factory``): asyncio's selector transport reads with ``sock.recv``, which this class
answers with ``recvmsg`` and keeps the stamp, converted to ``time.monotonic_ns`` (the clock of
every other tunegate time) by the data's age, ``time.time_ns() - stamp``, taken at the read.
A real-time clock step between a packet's arrival and its read shifts that one read's time; an
age beyond :data:`MAX_AGE_NS` (or below zero) is not believed and the read time is used.

Linux stamps received packets only while some socket asks for it, and turns the stamping on in
deferred work when the first one does (and off when the last one closes): of fresh connections
opened one after another, each alone, 98 of 300 first reads came unstamped here. A client calls
:func:`hold_kernel_stamps` before its first request: it keeps stamping on for the process and
waits until it is (0 of 300 unstamped).

The stamp is taken where a packet enters the host's network stack. On a network that loses or
reorders packets, a segment that fills a hole can carry the stamp of a later segment that came
before it (the kernel merges them), so that read's time can be early by the retransmission:
loopback and a healthy local network do not do this; a lossy path to a remote server can.

Where the kernel gives no stamp (another operating system or processor family, a socket option
refused, an event loop that reads the descriptor itself such as uvloop) ``receipt_ns`` stays
``None`` and the reader takes the time itself, as before; the run's ``client.kernel_receipts``
says which share of reads had the kernel's time.
"""

from __future__ import annotations

import atexit
import platform
import socket
import struct
import sys
import time
from typing import Any

__all__ = [
    "KERNEL_STAMPS",
    "MAX_AGE_NS",
    "KernelStampedSocket",
    "hold_kernel_stamps",
    "kernel_stamped_socket",
    "monotonic_receipt_ns",
]

# SO_TIMESTAMPNS (= SCM_TIMESTAMPNS) of Linux's generic socket ABI, which x86-64 and 64-bit Arm
# use; Python's socket module does not name it. A struct timespec of two 64-bit fields there.
_SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY_BYTES = socket.CMSG_SPACE(_TIMESPEC.size) if sys.platform == "linux" else 0
_NS_PER_S = 1_000_000_000

KERNEL_STAMPS = sys.platform == "linux" and platform.machine() in {"x86_64", "aarch64", "arm64"}
"""Whether this platform's kernel can stamp received bytes the way this module asks."""

MAX_AGE_NS = 10 * _NS_PER_S
"""Bytes said to have waited longer than this in the socket are a clock step, not a wait."""


def monotonic_receipt_ns(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The kernel's receipt stamp in ``ancillary`` (``recvmsg``'s), on the monotonic clock.

    ``None`` when it holds no stamp, or one whose age is not believable (a clock step).
    """
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(data)
            # Real time first: a pause between the two reads makes the result late, never early.
            age_ns = time.time_ns() - (seconds * _NS_PER_S + nanoseconds)
            now_ns = time.monotonic_ns()
            return now_ns - age_ns if 0 <= age_ns <= MAX_AGE_NS else None
    return None


class KernelStampedSocket(socket.socket):
    """A TCP socket whose reads keep the kernel's receipt time of what they returned.

    ``receipt_ns`` holds the monotonic time of the newest bytes of the last read, or ``None``
    when that read came without a stamp (``stamping`` is false where the option was refused).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receipt_ns: int | None = None
        self.stamping = False
        if KERNEL_STAMPS:
            try:
                self.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                self.stamping = True
            except OSError:  # a kernel or sandbox that refuses it: times taken at the read
                pass

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if not self.stamping:
            return super().recv(bufsize, flags)
        data, ancillary, _, _ = self.recvmsg(bufsize, _ANCILLARY_BYTES, flags)
        self.receipt_ns = monotonic_receipt_ns(ancillary)
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        if not self.stamping:
            return super().recv_into(buffer, nbytes, flags)
        view = memoryview(buffer)
        target = view[:nbytes] if nbytes else view
        size, ancillary, _, _ = self.recvmsg_into([target], _ANCILLARY_BYTES, flags)
        self.receipt_ns = monotonic_receipt_ns(ancillary)
        return size


def kernel_stamped_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """``TCPConnector(socket_factory=...)``: a :class:`KernelStampedSocket` for ``addr_info``
    (``(family, type, proto, canonname, address)``)."""
    family, kind, proto = addr_info[0], addr_info[1], addr_info[2]
    return KernelStampedSocket(family=family, type=kind, proto=proto)


_holder: socket.socket | None = None


def hold_kernel_stamps() -> bool:
    """Keep the kernel stamping received packets for the rest of this process; ``True`` when
    it does (later calls: at once, once the first one opened the holder).

    The first call opens a datagram socket that asks for stamps (never bound or used, closed at
    exit) and then waits, at most :data:`SWITCH_ON_WAIT_S`, until a loopback TCP byte comes back
    stamped: Linux turns the stamping on in deferred work. ``False`` where the kernel does not
    stamp or refuses to; reads are then timed by the client, as without this module.
    """
    global _holder
    if _holder is not None:
        return True
    if not KERNEL_STAMPS:
        return False
    try:
        holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:  # out of descriptors, no IPv4 in this namespace, a sandbox's refusal
        return False
    try:
        holder.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        switched_on = _stamping_switched_on(time.monotonic() + SWITCH_ON_WAIT_S)
    except OSError:
        holder.close()
        return False
    _holder = holder
    atexit.register(holder.close)
    return switched_on


SWITCH_ON_WAIT_S = 0.05
"""How long the first :func:`hold_kernel_stamps` waits for the kernel to start stamping."""


def _stamping_switched_on(deadline: float) -> bool:
    """Send one byte over loopback TCP until it comes back stamped or ``deadline`` passes."""
    with (socket.create_server(("127.0.0.1", 0)) as listener,
          KernelStampedSocket(socket.AF_INET, socket.SOCK_STREAM) as client):
        client.settimeout(1.0)
        client.connect(listener.getsockname())
        server, _ = listener.accept()
        with server:
            while True:
                server.sendall(b"x")
                client.recv(1)
                if client.receipt_ns is not None:
                    return True
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.001)
