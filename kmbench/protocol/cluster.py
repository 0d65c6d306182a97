"""Who may reach a Dask cluster that kmbench uses, and how (issue 49: "no one else gets in").

- A cluster kmbench starts itself (the Dask rows' LocalCluster and LocalCUDACluster) listens
  on 127.0.0.1 only, its dashboard too: `local_only` says what each passes. Dask's own default
  dashboard (":0", or 8787) listens on every interface.
- A scheduler named by address (`--scheduler`, $KMBENCH_DASK_SCHEDULER) is reached as Dask
  reaches it, with Dask's own security settings: on this machine (a loopback address, or
  inproc://) plainly; over the network only by TLS, with the certificates Dask's configuration
  names (distributed.comm.tls.ca-file, distributed.comm.tls.client.cert and .key). The
  scheduler then admits only clients whose certificate its CA signed. `check_address`
  refuses anything else in one sentence, before anything runs.

kmbench never passes a Security object of its own: Client() reads Dask's configuration
(~/.config/dask/*.yaml or DASK_DISTRIBUTED__COMM__TLS__* variables), so the scheduler, the
workers and kmbench are configured in one place, as Dask documents it.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from kmbench.errors import ImplementationError, UsageError

CONNECT_TIMEOUT = "10s"
TLS_KEYS = {"tls_ca_file": "distributed.comm.tls.ca-file", "tls_client_cert": "distributed.comm.tls.client.cert"}
HOW = "docs/usage.md, section Dask, shows the configuration"


def local_only(in_process: bool = False) -> dict:
    """What a cluster kmbench starts itself passes to LocalCluster or LocalCUDACluster to listen
    on 127.0.0.1 only: the scheduler's and each worker's HTTP servers there (Dask's defaults,
    ":8787" and ":0", listen on every interface) and, with worker processes, the scheduler
    and workers themselves. In one process they talk by inproc://, which no other process
    can reach, and Dask refuses a host for it."""
    http = {"dashboard_address": "127.0.0.1:0", "worker_dashboard_address": "127.0.0.1:0"}
    return http if in_process else {"host": "127.0.0.1", **http}



def _is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or the name localhost. Any other name counts as the network: kmbench
    does not resolve it (a name that resolves here may not resolve the same elsewhere)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split(address: str) -> tuple[str, str]:
    """(scheme, host) of a Dask address; no scheme is Dask's default, tcp."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    return scheme, urlsplit(f"//{rest}").hostname or ""


def check_address(address: str, option: str) -> str:
    """The address, if kmbench may reach it as it stands; else a UsageError that says how to."""
    scheme, host = split(address)
    if scheme == "inproc":
        return address
    if scheme == "tls":
        _check_tls(address, option)
        return address
    if scheme != "tcp":
        raise UsageError(f"{option} {address}: kmbench reaches a Dask scheduler by tcp:// on this machine "
                         f"or by tls://; got {scheme}://.")
    if not _is_loopback(host):
        raise UsageError(f"{option} {address} is on the network, where kmbench reaches a scheduler only by "
                         f"TLS: start it with --protocol tls and name tls://HOST:PORT, "
                         f"with its certificates in Dask's configuration ({HOW}).")
    return address


def _check_tls(address: str, option: str) -> None:
    """Dask's configuration names the CA and this client's certificate (without them the
    handshake fails later with a message about SSL contexts)."""
    try:
        from distributed.security import Security
    except ImportError:
        raise UsageError(f"{option} needs Dask: pip install 'kmbench[dask]'.") from None
    security = Security()
    missing = [key for attribute, key in TLS_KEYS.items() if not getattr(security, attribute)]
    if missing:
        raise UsageError(f"{option} {address} uses TLS, but Dask's configuration names no {' and no '.join(missing)} "
                         f"({HOW}).")


def connect(address: str):
    """A distributed.Client of the scheduler at `address`, with Dask's configured security;
    a scheduler that cannot be reached is an ImplementationError that says so."""
    from distributed import Client

    try:
        return Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:  # refused, unreachable, TLS refused, timed out
        raise ImplementationError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
