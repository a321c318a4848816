"""Every socket the kernel lets this process open, and which of them reach an HTTP server.

Usage: python3 socket_reach.py PORT [FAMILY...]

Tries socket(family, type, protocol) for families 0..63 (or those given), the socket types the
kernel knows, and protocols 0..299 (INET, INET6) or 0..31 (the others). Each socket it got is
connected to 127.0.0.1:PORT, [::1]:PORT and [::ffff:127.0.0.1]:PORT through libc (so that
families Python has no address format for, such as AF_SMC, are tried too), a new socket for
each: by `connect`, and for stream sockets also by TCP Fast Open (`sendto` with `MSG_FASTOPEN`,
the request in the SYN). `GET /readyz` is asked on each connection. On TCP sockets it also tries
`setsockopt(TCP_ULP, "tls")` (a ULP turns a TCP socket into another kind, SMC's among them).
Prints one JSON object: `opened` ([family, type, protocol] triples), `reached` (those over
which an HTTP response came back), `errors` (errno of each refused socket() call, counted) and
`ulp` (each TCP socket's answer to the ULP). Used by tests/tests/sandbox/network.rs from inside
and outside the sandbox.
"""

import ctypes
import errno
import json
import os
import select
import socket
import struct
import sys
import time

PORT = int(sys.argv[1])
FAMILIES = [int(family) for family in sys.argv[2:]] or range(64)
TYPES = [1, 2, 3, 4, 5, 6, 10]
libc = ctypes.CDLL(None, use_errno=True)


def sockaddr_in(host):
    return struct.pack("=HH4s8x", socket.AF_INET, socket.htons(PORT), socket.inet_aton(host))


def sockaddr_in6(host):
    packed = socket.inet_pton(socket.AF_INET6, host)
    return struct.pack("=HHI16sI", socket.AF_INET6, socket.htons(PORT), 0, packed, 0)


ADDRESSES = [sockaddr_in("127.0.0.1"), sockaddr_in6("::1"), sockaddr_in6("::ffff:127.0.0.1")]


def connect(triple, address):
    """A new socket of `triple` connected to `address`, or None."""
    fd = libc.socket(triple[0], triple[1] | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, triple[2])
    if fd < 0:
        return None
    buffer = ctypes.create_string_buffer(address, len(address))
    if libc.connect(fd, buffer, len(address)) == 0:
        return fd
    if ctypes.get_errno() == errno.EINPROGRESS:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if poller.poll(300) and struct.unpack("i", socket_option(fd))[0] == 0:
            return fd
    os.close(fd)
    return None


def socket_option(fd):
    value = ctypes.c_int(0)
    size = ctypes.c_uint32(4)
    libc.getsockopt(fd, socket.SOL_SOCKET, socket.SO_ERROR, ctypes.byref(value), ctypes.byref(size))
    return struct.pack("i", value.value)


def fast_open(triple, address):
    """A new socket of `triple` that sent the request in its SYN (TCP Fast Open) to `address`."""
    fd = libc.socket(triple[0], triple[1] | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, triple[2])
    if fd < 0:
        return None
    buffer = ctypes.create_string_buffer(address, len(address))
    sent = libc.sendto(fd, REQUEST, len(REQUEST), MSG_FASTOPEN, buffer, len(address))
    if sent > 0 or ctypes.get_errno() == errno.EINPROGRESS:
        return fd
    os.close(fd)
    return None


def ulp(triple):
    """What setsockopt(TCP_ULP, "tls") on a new socket of `triple` answers: "ok" or an errno."""
    fd = libc.socket(triple[0], triple[1] | socket.SOCK_CLOEXEC, triple[2])
    if fd < 0:
        return "no socket"
    name = ctypes.create_string_buffer(b"tls", 4)
    result = libc.setsockopt(fd, socket.IPPROTO_TCP, TCP_ULP, name, 4)
    code = ctypes.get_errno()
    os.close(fd)
    return "ok" if result == 0 else errno.errorcode.get(code, str(code))


REQUEST = b"GET /readyz HTTP/1.1\r\nHost: wexec\r\nConnection: close\r\n\r\n"
MSG_FASTOPEN = 0x20000000
TCP_ULP = 31
opened = []
errors = {}
connected = []
ulps = {}
for family in FAMILIES:
    protocols = range(300) if family in (socket.AF_INET, socket.AF_INET6) else range(32)
    for kind in TYPES:
        for protocol in protocols:
            fd = libc.socket(family, kind | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, protocol)
            if fd < 0:
                code = errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
                errors[code] = errors.get(code, 0) + 1
                continue
            os.close(fd)
            opened.append([family, kind, protocol])
            for address in ADDRESSES:
                connection = connect([family, kind, protocol], address)
                if connection is not None:
                    connected.append((connection, [family, kind, protocol]))
                if kind == socket.SOCK_STREAM:
                    early = fast_open([family, kind, protocol], address)
                    if early is not None:
                        connected.append((early, [family, kind, protocol]))
            if family in (socket.AF_INET, socket.AF_INET6) and kind == socket.SOCK_STREAM:
                ulps["%d,%d,%d" % (family, kind, protocol)] = ulp([family, kind, protocol])

for fd, _ in connected:
    try:
        os.write(fd, REQUEST)
    except OSError:
        pass
reached = []
triples = dict(connected)
answers = {fd: b"" for fd in triples}
waiting = set(triples)
deadline = time.monotonic() + 2
while waiting and time.monotonic() < deadline:
    poller = select.poll()
    for fd in waiting:
        poller.register(fd, select.POLLIN)
    for fd, _ in poller.poll(100):
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        answers[fd] += data
        if answers[fd].startswith(b"HTTP/"):
            if triples[fd] not in reached:
                reached.append(triples[fd])
            waiting.discard(fd)
        elif not data:
            waiting.discard(fd)
print(json.dumps({"opened": opened, "reached": reached, "errors": errors, "ulp": ulps}))
