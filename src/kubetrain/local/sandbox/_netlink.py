"""The few rtnetlink requests a TrainJob's pod network needs: a bridge, veth pairs, addresses, routes.

Stdlib only: the network namespace holder (``_nsholder``) imports it as a sibling script module, started with
``-S``. It speaks to the kernel directly rather than running ``ip``, because a program it executed would lose the
capabilities the holder has in its user namespace (an ordinary user's uid is not root there), and because a pod's
network is made in a few hundred microseconds this way instead of tens of milliseconds of ``ip`` processes.
"""

from __future__ import annotations

import errno
import itertools
import socket
import struct

RTM_NEWLINK = 16
RTM_NEWADDR = 20
RTM_NEWROUTE = 24
NLMSG_ERROR = 2
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLM_F_EXCL = 0x200
NLM_F_CREATE = 0x400
NLA_F_NESTED = 0x8000

IFLA_IFNAME = 3
IFLA_MTU = 4
IFLA_MASTER = 10
IFLA_LINKINFO = 18
IFLA_NET_NS_PID = 19
IFLA_INFO_KIND = 1
IFLA_INFO_DATA = 2
VETH_INFO_PEER = 1
IFA_ADDRESS = 1
IFA_LOCAL = 2
RTA_OIF = 4
RTA_GATEWAY = 5
RT_TABLE_MAIN = 254
RTPROT_BOOT = 3
RT_SCOPE_UNIVERSE = 0
RTN_UNICAST = 1
IFF_UP = 0x1

_seq = itertools.count(1)


class NetlinkError(OSError):
    pass


def _attr(kind: int, data: bytes) -> bytes:
    length = 4 + len(data)
    return struct.pack("HH", length, kind) + data + b"\0" * (-length % 4)


def _name(kind: int, name: str) -> bytes:
    return _attr(kind, name.encode() + b"\0")


def _u32(kind: int, value: int) -> bytes:
    return _attr(kind, struct.pack("I", value))


def _ifinfo(index: int = 0, flags: int = 0, change: int = 0) -> bytes:
    return struct.pack("BxHiII", socket.AF_UNSPEC, 0, index, flags, change)


def _request(kind: int, flags: int, body: bytes, what: str) -> None:
    """Send one request in the caller's network namespace and wait for the kernel's acknowledgement."""
    seq = next(_seq)
    msg = struct.pack("IHHII", 16 + len(body), kind, NLM_F_REQUEST | NLM_F_ACK | flags, seq, 0) + body
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as s:
        s.bind((0, 0))
        s.send(msg)
        while True:
            data = s.recv(65536)
            offset = 0
            while offset + 16 <= len(data):
                length, mtype, _flags, mseq, _pid = struct.unpack_from("IHHII", data, offset)
                if mtype == NLMSG_ERROR and mseq == seq:
                    (error,) = struct.unpack_from("i", data, offset + 16)
                    if error:
                        raise NetlinkError(-error, f"{what}: {errno.errorcode.get(-error, str(-error))}")
                    return
                offset += max(length, 16) + (-length % 4)


def create_bridge(name: str, mtu: int) -> None:
    info = _attr(IFLA_LINKINFO | NLA_F_NESTED, _name(IFLA_INFO_KIND, "bridge"))
    body = _ifinfo() + _name(IFLA_IFNAME, name) + _u32(IFLA_MTU, mtu) + info
    _request(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, body, f"bridge {name}")


def create_veth(name: str, peer: str, peer_pid: int, mtu: int) -> None:
    """A veth pair: ``name`` here, ``peer`` in the network namespace of process ``peer_pid``."""
    peer_body = _ifinfo() + _name(IFLA_IFNAME, peer) + _u32(IFLA_NET_NS_PID, peer_pid) + _u32(IFLA_MTU, mtu)
    data = _attr(IFLA_INFO_DATA | NLA_F_NESTED, _attr(VETH_INFO_PEER, peer_body))
    info = _attr(IFLA_LINKINFO | NLA_F_NESTED, _name(IFLA_INFO_KIND, "veth") + data)
    body = _ifinfo() + _name(IFLA_IFNAME, name) + _u32(IFLA_MTU, mtu) + info
    _request(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, body, f"veth {name}")


def set_up(name: str, master: str | None = None) -> None:
    """Bring ``name`` up, enslaved to the bridge ``master`` when given."""
    index = socket.if_nametoindex(name)
    attrs = _u32(IFLA_MASTER, socket.if_nametoindex(master)) if master else b""
    _request(RTM_NEWLINK, 0, _ifinfo(index, IFF_UP, IFF_UP) + attrs, f"link {name} up")


def add_address(name: str, address: str, prefix: int) -> None:
    index = socket.if_nametoindex(name)
    raw = socket.inet_aton(address)
    body = struct.pack("BBBBI", socket.AF_INET, prefix, 0, RT_SCOPE_UNIVERSE, index)
    body += _attr(IFA_LOCAL, raw) + _attr(IFA_ADDRESS, raw)
    _request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, body, f"address {address}/{prefix} on {name}")


def add_default_route(gateway: str, name: str) -> None:
    index = socket.if_nametoindex(name)
    body = struct.pack(
        "BBBBBBBBI", socket.AF_INET, 0, 0, 0, RT_TABLE_MAIN, RTPROT_BOOT, RT_SCOPE_UNIVERSE, RTN_UNICAST, 0
    )
    body += _attr(RTA_GATEWAY, socket.inet_aton(gateway)) + _u32(RTA_OIF, index)
    _request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, body, f"default route via {gateway}")
