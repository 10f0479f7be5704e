"""Target children run offline: a connection to a host other than this machine is refused.

A sweep must be deterministic and must not reach a real service: the model is scripted
(``--model-script``), the services are the ledger and the user's stubs. An app that still tries
the network (a client built with a real API key, a telemetry exporter) would fail in a way that
depends on the machine -- a DNS error here, a real charge elsewhere. So in each child the
standard library's resolver and socket connects refuse any host that is not a loopback address,
with an ``OSError`` (what a library already handles as "offline"), after noting the host in the
trace: the sweep's fault-free run that fails then says, in one line, which host the app tried
(``sim.targets.sweep.reference_run``). Local services (a Temporal or Prefect server the harness
started, a Postgres on localhost) and Unix sockets are untouched.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from sim.targets.boundaries import TraceLog
from sim.targets.shapes import TraceRow

#: The trace row of a refused connection.
NETWORK_ROW = "network"
_LOCAL_NAMES = ("localhost", "localhost.localdomain")


class OfflineError(ConnectionRefusedError):
    """The app tried a host on the network; sweeps run offline."""


def is_local(host: object) -> bool:
    """Whether ``host`` (a name, an address, None for "any") is this machine."""
    if host is None:
        return True
    name = host.decode() if isinstance(host, bytes) else str(host)
    if name in ("", *_LOCAL_NAMES):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def refuse_network(log: TraceLog, process: str) -> None:
    """From now on, in this process: resolving or connecting to a host that is not local notes
    it in the trace (once per host) and raises ``OfflineError``."""
    resolve, connect, connect_ex = (
        socket.getaddrinfo,
        socket.socket.connect,
        socket.socket.connect_ex,
    )
    noted: set[str] = set()

    def refuse(host: object, port: object) -> OfflineError:
        where = f"{host!s}:{port!s}"
        if where not in noted:
            noted.add(where)
            log.write(
                {"t": NETWORK_ROW, "p": process, "host": str(host), "port": str(port)}, sync=True
            )
        return OfflineError(f"durable-sim runs apps offline: refused {where}")

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_local(host):
            raise refuse(host, port)
        return resolve(host, port, *args, **kwargs)

    def checked(sock: socket.socket, address: object) -> None:
        inet = sock.family in (socket.AF_INET, socket.AF_INET6)
        if inet and isinstance(address, tuple) and not is_local(address[0]):
            raise refuse(address[0], address[1])

    def guarded_connect(sock: socket.socket, address: Any) -> None:
        checked(sock, address)
        connect(sock, address)

    def guarded_connect_ex(sock: socket.socket, address: Any) -> int:
        checked(sock, address)
        return connect_ex(sock, address)

    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = guarded_connect  # type: ignore[method-assign, assignment]  # this process only
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign, assignment]  # this process only


def network_attempts(rows: list[TraceRow]) -> list[str]:
    """The hosts a run's children were refused, ``HOST:PORT``, in the order first tried."""
    seen: list[str] = []
    for row in rows:
        if row.get("t") == NETWORK_ROW:
            where = f"{row['host']}:{row['port']}"
            if where not in seen:
                seen.append(where)
    return seen
