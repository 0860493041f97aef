"""The one outbound HTTP client: shadow pipelines, candidate gates, webhooks, audit checkpoints.

Every call the console makes to a URL someone configured goes through `post` (or `request`), so
redirects, proxies, timeouts, body limits, retries and the egress policy live in one place
(healthchecks' ``hc/lib/curl.py`` serves every integration the same way). What it does:

- **Egress policy.** The host is resolved once; each address is checked with `address_refusal`:
  loopback, private, link-local, shared, multicast, reserved and unspecified addresses are refused
  unless a network of ``OUTBOUND_ALLOWED_NETWORKS`` holds them; a cloud metadata address
  (169.254.169.254, fd00:ec2::254) only when listed as itself (``/32``, ``/128``), so allowing a
  link-local or private range does not open it by accident. Public addresses are allowed. The
  connection is then made to the address that passed (never to the name, which could resolve
  elsewhere a moment later: DNS rebinding), while the request carries the URL's host in its
  ``Host`` header and, for https, in SNI and the certificate check.
- **No redirects.** A 3xx is a failure that says where it pointed: a redirect would turn a POST
  into a GET without a body, and could lead anywhere the policy never saw.
- **Proxies** from the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``) are ignored
  unless ``OUTBOUND_USE_ENV_PROXY`` is on; then the console still resolves and checks the host,
  and asks the proxy to tunnel (``CONNECT``) to the checked address.
- **Time.** ``connect_timeout`` (default: ``timeout``) bounds opening the connection, ``timeout``
  each read; ``deadline`` (default: ``timeout``) bounds the whole try, so a server that sends a
  byte a second forever is cut off too.
- **Size.** At most ``max_bytes`` (default ``OUTBOUND_MAX_RESPONSE_BYTES``) of response body
  are read; a larger one is a failure, not a truncated success.
- **Retries.** One policy (`Retry`): by default only failures to connect are tried again (the
  request never reached the server, so asking again cannot do anything twice); a caller whose
  call is idempotent may add timeouts, broken connections and 5xx / 408 / 429 replies, as shadow
  pipelines do. Callers keep their own job-level retries (notifications' attempts, Celery).

Anything that is not a 2xx answer raises `OutboundError`, whose message names ``target`` ("the
pipeline", "the candidate") and says what to do about it, and whose ``kind`` says what failed.
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
USER_AGENT = "abstention-review-console"
_EXCERPT_BYTES = 300
_CHUNK = 64 * 1024

# What failed (OutboundError.kind).
INVALID_URL = "invalid_url"  # not an http(s) URL the client can call
INVALID_HEADER = "invalid_header"  # a header name or value that would split the request (CR, LF, NUL)
REFUSED = "refused"  # the egress policy refused every address of the host
CONNECT = "connect"  # no connection (name not resolved, refused, unreachable, no answer to connect)
TLS = "tls"  # the server's certificate does not hold for the URL's name (not tried again)
TIMEOUT = "timeout"  # connected, but no complete answer within the timeout or the deadline
BROKEN = "broken"  # the connection failed after the request may have been sent
REDIRECT = "redirect"  # a 3xx answer
STATUS = "status"  # a 4xx or 5xx answer
TOO_LARGE = "too_large"  # a body larger than max_bytes
MALFORMED = "malformed"  # not an HTTP answer


class OutboundError(Exception):
    """The call gave no 2xx answer; the message says why in words a person can act on."""

    def __init__(self, message: str, *, kind: str, status: int | None = None, location: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.location = location

    @property
    def transient(self) -> bool:
        """Whether asking again later may get another result."""
        if self.kind == STATUS:
            return self.status is not None and (self.status >= 500 or self.status in (408, 429))
        return self.kind in (CONNECT, TIMEOUT, BROKEN)


# What a failure may say to whoever reads it in the console (an outbox row, a trial page), where the
# destination was chosen by a user: nothing the far side sent, and one answer for "refused",
# "unreachable" and "no answer in time", whose difference would map which ports are open.
_UNREACHED = (CONNECT, TIMEOUT, BROKEN, MALFORMED)


def public_reason(error: OutboundError, target: str) -> str:
    """A short reason for a failed call that reveals neither the reply nor the state of the port.

    Policy and configuration failures (an invalid URL or header, a destination the egress policy
    refuses) keep their full message: they say what the console itself refused. The full message of
    any failure goes to the log for the operator."""
    if error.kind in (INVALID_URL, INVALID_HEADER, REFUSED):
        return str(error)
    if error.kind in _UNREACHED:
        return f"{target} could not be reached, or did not answer in time"
    if error.kind == TLS:
        return f"the certificate of {target} does not hold for its name"
    if error.kind == REDIRECT:
        return f"{target} answered with a redirect; redirects are not followed: configure the final URL"
    if error.kind == STATUS:
        return f"{target} answered HTTP {error.status}"
    if error.kind == TOO_LARGE:
        return f"{target} answered with a larger body than the console reads"
    return f"the call to {target} failed"


@dataclass(frozen=True)
class Retry:
    """How often a call is tried and after which failures. `on` holds failure kinds; STATUS in it
    retries only the transient statuses (5xx, 408, 429). Pauses: backoff, 2 x backoff, 4 x ..."""

    tries: int = 3
    backoff: float = 0.25
    on: frozenset[str] = frozenset({CONNECT})

    def retries(self, error: OutboundError) -> bool:
        if error.kind == STATUS:
            return STATUS in self.on and error.transient
        return error.kind in self.on


CONNECT_FAILURES = Retry()  # the default: safe for any call, since nothing reached the server
NO_RETRY = Retry(tries=1, on=frozenset())
IDEMPOTENT = frozenset({CONNECT, TIMEOUT, BROKEN, STATUS})  # for callers whose call may be repeated


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


# ---------------------------------------------------------------------------------------------
# The egress policy


def address_refusal(address: str, allowed: Iterable[IPNetwork]) -> str | None:
    """Why the console may not connect to `address` (e.g. "a private address"), or None."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone ("fe80::1%eth0") names no other host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:10.0.0.1 reaches 10.0.0.1
    networks = [network for network in allowed if network.version == ip.version]
    if ip in METADATA_ADDRESSES:
        if any(network.num_addresses == 1 and ip in network for network in networks):
            return None
        return "a cloud metadata address"
    if any(ip in network for network in networks):
        return None
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:  # 224.0.0.0/4 counts as "global" to the ipaddress module
        return "a multicast address"
    if ip.is_unspecified or ip.is_reserved:  # before is_private, which holds 0.0.0.0/8 and 240.0.0.0/4 too
        return "a reserved address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a reserved address"
    return None


def tls_context() -> ssl.SSLContext:
    """The system's trusted certificates, hostname checked (tests replace this with their own CA)."""
    return ssl.create_default_context()


def resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, in the resolver's order (tests replace this)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        if sockaddr[0] not in addresses:
            addresses.append(sockaddr[0])
    return addresses


def _permitted_addresses(host: str, port: int, target: str) -> list[str]:
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError) as exc:
        raise OutboundError(f"could not reach {target}: {host} does not resolve ({exc})", kind=CONNECT) from None
    allowed = settings.OUTBOUND_ALLOWED_NETWORKS
    permitted, refused = [], []
    for address in addresses:
        reason = address_refusal(address, allowed)
        if reason is None:
            permitted.append(address)
        else:
            refused.append(f"{address} ({reason})")
    if not permitted:
        raise OutboundError(
            f"refused to call {target}: {host} resolves to {', '.join(refused) or 'nothing'}; "
            "the egress policy allows public addresses and those in OUTBOUND_ALLOWED_NETWORKS",
            kind=REFUSED,
        )
    return permitted


# ---------------------------------------------------------------------------------------------
# The connection


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str
    host_header: str


def url_problem(url: str) -> str | None:
    """What makes `url` one the client will not call ("carries credentials; ..."), or None.
    For checking a URL when it is configured, so the mistake shows then, not at the first call."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- parsing the port is the check
    except ValueError as exc:
        return f"is not valid: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"must be http(s)://host/...; got {url!r:.200}"
    if parts.username is not None or parts.password is not None:
        return "carries credentials; send them in a header"
    return None


def _parse(url: str, target: str) -> _Target:
    problem = url_problem(url)
    if problem:
        raise OutboundError(f"the URL of {target} {problem}", kind=INVALID_URL)
    parts = urlsplit(url)
    port = parts.port
    default_port = 443 if parts.scheme == "https" else 80
    port = port or default_port
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    return _Target(
        scheme=parts.scheme,
        host=host,
        port=port,
        path=(parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
        host_header=shown if port == default_port else f"{shown}:{port}",
    )


@dataclass(frozen=True)
class _Proxy:
    host: str
    port: int
    authorization: str | None  # "Basic ..." from credentials in the proxy's URL


def _proxy_for(target: _Target) -> _Proxy | None:
    if not settings.OUTBOUND_USE_ENV_PROXY:
        return None
    proxy_url = urllib.request.getproxies_environment().get(target.scheme)
    if not proxy_url or urllib.request.proxy_bypass_environment(target.host):
        return None
    parts = urlsplit(proxy_url if "://" in proxy_url else f"http://{proxy_url}")
    if not parts.hostname:
        return None
    authorization = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = "Basic " + base64.b64encode(credentials).decode("ascii")
    return _Proxy(parts.hostname, parts.port or 8080, authorization)


def _tunnel(proxy: _Proxy, address: str, port: int, timeout: float) -> socket.socket:
    """A socket to `address`:`port` through the proxy's CONNECT (to the checked address, not the
    name: the proxy resolving the name again would undo the check)."""
    sock = socket.create_connection((proxy.host, proxy.port), timeout=timeout)
    authority = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        reply = http.client.HTTPResponse(sock, method="CONNECT")
        reply.begin()  # the status line and headers; nothing follows until the request is sent
    except BaseException:
        sock.close()
        raise
    if reply.status != 200:
        sock.close()
        raise OSError(f"the proxy {proxy.host}:{proxy.port} refused the tunnel: {reply.status} {reply.reason}")
    return sock


class _PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection to an address checked beforehand, never to the name again.

    http.client would resolve the host itself on connect; here `connect` opens a socket to
    `address` (directly, or through a proxy's CONNECT tunnel) and, for https, does TLS with the
    URL's host as SNI and as the name the certificate must carry."""

    def __init__(
        self,
        target: _Target,
        *,
        address: str,
        connect_timeout: float,
        read_timeout: float,
        proxy: _Proxy | None,
    ) -> None:
        super().__init__(target.host, target.port, timeout=read_timeout)
        self.target = target
        self.address = address
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.proxy = proxy
        self.raw: socket.socket | None = None
        self.aborted = threading.Event()

    def connect(self) -> None:
        if self.proxy:
            sock = _tunnel(self.proxy, self.address, self.target.port, self.connect_timeout)
        else:
            sock = socket.create_connection((self.address, self.target.port), timeout=self.connect_timeout)
        self.raw = sock
        if self.aborted.is_set():  # the deadline passed while connecting
            sock.close()
            raise TimeoutError("deadline passed")
        sock.settimeout(self.read_timeout)
        if self.target.scheme == "https":
            sock = tls_context().wrap_socket(sock, server_hostname=self.target.host)
        self.sock = sock

    def close(self) -> None:
        super().close()
        if self.raw is not None:  # a socket whose TLS handshake or tunnel never finished
            self.raw.close()

    def abort(self) -> None:
        """Called by the deadline's timer from another thread: unblock whatever read is waiting."""
        self.aborted.set()
        for sock in (self.sock, self.raw):
            if sock is not None:
                try:
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)  # not SSLSocket.shutdown: no TLS goodbye
                except OSError:
                    pass


# ---------------------------------------------------------------------------------------------
# Calling


def post(url: str, body: bytes, **options: Any) -> Response:
    """POST `body` to `url` under the egress policy: the 2xx response or OutboundError. The
    options are `request`'s (timeout, headers, target, connect_timeout, deadline, max_bytes, retry,
    sleep)."""
    return request("POST", url, body=body, **options)


def request(
    method: str,
    url: str,
    *,
    timeout: float,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    target: str = "the endpoint",
    connect_timeout: float | None = None,
    deadline: float | None = None,
    max_bytes: int | None = None,
    retry: Retry = CONNECT_FAILURES,
    sleep: Callable[[float], None] = time.sleep,
) -> Response:
    """One call, tried again as `retry` says. See the module docstring for the rules."""
    tries = max(1, retry.tries)
    for attempt in range(tries):
        if attempt:
            sleep(retry.backoff * 2 ** (attempt - 1))
        try:
            return _try(
                method,
                url,
                body=body,
                headers=headers or {},
                target=target,
                timeout=timeout,
                connect_timeout=connect_timeout if connect_timeout is not None else timeout,
                deadline=deadline if deadline is not None else timeout,
                max_bytes=max_bytes if max_bytes is not None else settings.OUTBOUND_MAX_RESPONSE_BYTES,
            )
        except OutboundError as exc:
            if not retry.retries(exc):
                raise
            if attempt == tries - 1:
                raise OutboundError(
                    f"{exc} (gave up after {tries} tr{'y' if tries == 1 else 'ies'})",
                    kind=exc.kind,
                    status=exc.status,
                    location=exc.location,
                ) from None
    raise AssertionError("unreachable")


def _try(
    method: str,
    url: str,
    *,
    body: bytes | None,
    headers: Mapping[str, str],
    target: str,
    timeout: float,
    connect_timeout: float,
    deadline: float,
    max_bytes: int,
) -> Response:
    place = _parse(url, target)
    for name, value in headers.items():
        if any(character in f"{name}{value}" for character in "\r\n\x00") or not name.strip():
            raise OutboundError(f"the header {name!r:.60} for {target} is not one line of text", kind=INVALID_HEADER)
    addresses = _permitted_addresses(place.host, place.port, target)
    proxy = _proxy_for(place)
    ends = time.monotonic() + deadline
    sent = {"Host": place.host_header, "User-Agent": USER_AGENT, "Accept-Encoding": "identity", **headers}
    last_error: OutboundError | None = None
    for address in addresses:
        remaining = ends - time.monotonic()
        if remaining <= 0:
            break
        connection = _PinnedConnection(
            place,
            address=address,
            connect_timeout=min(connect_timeout, remaining),
            read_timeout=min(timeout, remaining),
            proxy=proxy,
        )
        timer = threading.Timer(remaining, connection.abort)
        timer.daemon = True
        timer.start()
        try:
            try:
                connection.connect()
            except (OSError, http.client.HTTPException) as exc:
                if connection.aborted.is_set():
                    break
                kind = TLS if isinstance(exc, ssl.SSLCertVerificationError) else CONNECT
                last_error = OutboundError(f"could not reach {target}: {_reason(exc, connect_timeout)}", kind=kind)
                continue  # the next address of the host, if any
            return _exchange(connection, method, place.path, body, sent, target, timeout, deadline, max_bytes)
        finally:
            timer.cancel()
            connection.close()
    if last_error is not None:
        raise last_error
    raise OutboundError(f"no answer within {deadline:g} s", kind=TIMEOUT)


def _exchange(
    connection: _PinnedConnection,
    method: str,
    path: str,
    body: bytes | None,
    headers: Mapping[str, str],
    target: str,
    timeout: float,
    deadline: float,
    max_bytes: int,
) -> Response:
    answered = False
    try:
        connection.request(method, path, body=body, headers=dict(headers))
        response = connection.getresponse()
        try:
            answered = True
            status = response.status
            if 300 <= status < 400:
                location = response.getheader("Location") or ""
                raise OutboundError(
                    f"{target} redirects (HTTP {status}) to {location[:300] or 'nowhere named'}; "
                    "redirects are not followed: configure the final URL",
                    kind=REDIRECT,
                    status=status,
                    location=location,
                )
            if not 200 <= status < 300:
                excerpt = _excerpt(response.read(_EXCERPT_BYTES + 1))
                raise OutboundError(
                    f"HTTP {status} from {target}" + (f": {excerpt}" if excerpt else ""), kind=STATUS, status=status
                )
            declared = response.getheader("Content-Length")
            if declared and declared.strip().isdigit() and int(declared) > max_bytes:
                raise _too_large(target, max_bytes)
            chunks: list[bytes] = []
            size = 0
            while True:
                chunk = response.read(min(_CHUNK, max_bytes + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > max_bytes:
                    raise _too_large(target, max_bytes)
            if connection.aborted.is_set():  # the timer cut a body with no length short: not a whole answer
                raise _late(answered, deadline)
            return Response(status=status, headers=dict(response.getheaders()), body=b"".join(chunks))
        finally:
            response.close()  # the connection hands the socket to a response that will close it
    except OutboundError:
        raise
    except (TimeoutError, OSError, http.client.HTTPException, ValueError, AttributeError) as exc:
        # After the deadline's timer shut the socket, a read fails in whatever way it happens to.
        if connection.aborted.is_set():
            raise _late(answered, deadline) from None
        if isinstance(exc, TimeoutError):
            raise OutboundError(f"no answer within {timeout:g} s", kind=TIMEOUT) from None
        if isinstance(exc, http.client.BadStatusLine | http.client.LineTooLong):
            raise OutboundError(f"{target} did not answer in HTTP: {exc!r:.200}", kind=MALFORMED) from None
        raise OutboundError(f"the connection to {target} failed: {exc!r:.300}", kind=BROKEN) from None


def _late(answered: bool, deadline: float) -> OutboundError:
    if answered:
        return OutboundError(f"the response did not finish within {deadline:g} s", kind=TIMEOUT)
    return OutboundError(f"no answer within {deadline:g} s", kind=TIMEOUT)


def _too_large(target: str, max_bytes: int) -> OutboundError:
    return OutboundError(f"the response from {target} is larger than {max_bytes} bytes", kind=TOO_LARGE)


def _reason(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"no connection within {timeout:g} s"
    return str(exc) or repr(exc)


def _excerpt(raw: bytes) -> str:
    text = raw[:_EXCERPT_BYTES].decode("utf-8", "replace").strip()
    return text + ("…" if len(raw) > _EXCERPT_BYTES else "")
