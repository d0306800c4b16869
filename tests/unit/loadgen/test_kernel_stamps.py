"""A read's time is when the kernel received the bytes, not when the client got to them."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest

from tunegate.loadgen import kernel_stamps
from tunegate.loadgen.kernel_stamps import (
    KERNEL_STAMPS,
    MAX_AGE_NS,
    KernelStampedSocket,
    hold_kernel_stamps,
    kernel_stamped_socket,
    monotonic_receipt_ns,
)

needs_kernel_stamps = pytest.mark.skipif(not KERNEL_STAMPS, reason="Linux x86-64 / arm64 only")
CLIENT_BUSY_S = 0.2


def _stamp(real_ns: int) -> list[tuple[int, int, bytes]]:
    seconds, nanoseconds = divmod(real_ns, 1_000_000_000)
    return [(socket.SOL_SOCKET, 35, struct.pack("@qq", seconds, nanoseconds))]


def test_a_stamp_becomes_a_monotonic_time_by_its_age() -> None:
    before = time.monotonic_ns()
    receipt = monotonic_receipt_ns(_stamp(time.time_ns() - 5_000_000))
    after = time.monotonic_ns()
    assert receipt is not None
    assert before - 5_000_000 <= receipt <= after - 5_000_000, "late if anything, never early"


def test_no_stamp_or_an_unbelievable_one_gives_none() -> None:
    assert monotonic_receipt_ns([]) is None
    assert monotonic_receipt_ns([(socket.SOL_SOCKET, 29, b"\0" * 16)]) is None, "other cmsg"
    assert monotonic_receipt_ns(_stamp(time.time_ns() + 10_000_000_000)) is None, "future"
    assert monotonic_receipt_ns(_stamp(time.time_ns() - MAX_AGE_NS - 10**9)) is None, "step"


def _connect(listener: socket.socket) -> tuple[KernelStampedSocket, socket.socket]:
    client = kernel_stamped_socket((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ()))
    assert isinstance(client, KernelStampedSocket)
    client.connect(listener.getsockname())
    server, _ = listener.accept()
    return client, server


def _stamped_first_reads(listener: socket.socket, count: int) -> int:
    """Of ``count`` fresh connections, each alone, how many first reads came stamped."""
    stamped = 0
    for _ in range(count):
        client, server = _connect(listener)
        with client, server:
            server.sendall(b"x")
            time.sleep(0.001)
            client.recv(16)
            stamped += client.receipt_ns is not None
    return stamped


@needs_kernel_stamps
def test_once_held_the_stamping_stamps_every_connection_from_its_first_read() -> None:
    assert hold_kernel_stamps(), "it waited until the kernel stamped"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        assert _stamped_first_reads(listener, count=50) == 50


def test_where_the_kernel_does_not_stamp_nothing_is_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_stamps, "KERNEL_STAMPS", False)
    monkeypatch.setattr(kernel_stamps, "_holder", None)
    assert hold_kernel_stamps() is False
    assert kernel_stamps._holder is None


@pytest.fixture
def connected() -> Iterator[tuple[KernelStampedSocket, socket.socket]]:
    """A stamped client socket and the server's end of its connection, over loopback TCP, with
    the kernel's stamping on (as a client holds it before its start)."""
    assert hold_kernel_stamps()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client, server = _connect(listener)
        with client, server:
            yield client, server


@needs_kernel_stamps
@pytest.mark.parametrize("read", ["recv", "recv_into"])
def test_bytes_read_late_keep_the_time_they_arrived(
    connected: tuple[KernelStampedSocket, socket.socket], read: str
) -> None:
    client, server = connected
    assert client.stamping
    sent_ns = time.monotonic_ns()
    server.sendall(b"data: hello\n\n")
    time.sleep(CLIENT_BUSY_S)  # the client is busy while the bytes wait in its socket
    read_ns = time.monotonic_ns()
    if read == "recv":
        assert client.recv(1024) == b"data: hello\n\n"
    else:
        buffer = bytearray(1024)
        assert client.recv_into(buffer, 5) == 5 and bytes(buffer[:5]) == b"data:"
    assert client.receipt_ns is not None
    assert sent_ns <= client.receipt_ns < sent_ns + 50_000_000 < read_ns


@needs_kernel_stamps
def test_a_read_of_bytes_that_arrived_apart_takes_the_newest_arrival(
    connected: tuple[KernelStampedSocket, socket.socket],
) -> None:
    client, server = connected
    server.sendall(b"first\n")
    time.sleep(0.1)
    second_ns = time.monotonic_ns()
    server.sendall(b"second\n")
    time.sleep(0.05)
    assert client.recv(1024) == b"first\nsecond\n"
    assert client.receipt_ns is not None and client.receipt_ns >= second_ns, (
        "never earlier than any of the read's bytes arrived")


def test_where_the_kernel_gives_no_stamp_reads_work_and_say_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kernel_stamps, "KERNEL_STAMPS", False)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = kernel_stamped_socket(
            (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ()))
        client.connect(listener.getsockname())
        server, _ = listener.accept()
        with client, server:
            server.sendall(b"abc")
            assert client.recv(16) == b"abc"
            assert isinstance(client, KernelStampedSocket)
            assert not client.stamping and client.receipt_ns is None
