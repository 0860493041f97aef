"""The one outbound client against real servers on 127.0.0.1: redirects, slow and huge replies,
retries, proxies and the egress policy (with the resolver replaced, since no real name resolves
to a private address on demand)."""

from __future__ import annotations

import base64
import ipaddress
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from console.core import outbound
from console.env import ConfigError, env_networks
from tests.standin import LoopbackServer


def _networks(*cidrs: str) -> tuple:
    return tuple(ipaddress.ip_network(cidr) for cidr in cidrs)


class Server(LoopbackServer):
    """A server on 127.0.0.1 whose POST handler is `reply(handler)`; it keeps every request's
    path and headers."""

    path = "/hook"

    def __init__(self, reply) -> None:
        self.reply = reply
        self.requests: list[dict] = []
        super().__init__()
        self.port = self.server.server_address[1]

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append({"path": self.path, "headers": dict(self.headers)})
                try:
                    server.reply(self)
                except OSError:  # the client hung up, as it should
                    pass

        return Handler


def _send(handler, status: int, body: bytes = b"", headers: dict | None = None) -> None:
    handler.send_response(status)
    for name, value in (headers or {"Content-Length": str(len(body))}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def ok(handler) -> None:
    _send(handler, 200, b'{"ok": true}')


def _post(url: str, **options) -> outbound.Response:
    options.setdefault("timeout", 2)
    return outbound.post(url, b"{}", headers={"Content-Type": "application/json"}, **options)


def test_a_2xx_answer_comes_back_with_its_body():
    with Server(ok) as server:
        response = _post(server.url)
    assert (response.status, response.body) == (200, b'{"ok": true}')
    assert server.requests[0]["headers"]["Host"] == f"127.0.0.1:{server.port}"


def test_a_redirect_is_a_failure_that_says_where_it_pointed_and_is_not_followed():
    def redirect(handler) -> None:
        if handler.path == "/hook":
            _send(handler, 302, headers={"Location": "/elsewhere", "Content-Length": "0"})
        else:
            ok(handler)

    with Server(redirect) as server:
        with pytest.raises(outbound.OutboundError) as caught:
            _post(server.url, target="the webhook")
    assert caught.value.kind == outbound.REDIRECT and caught.value.location == "/elsewhere"
    assert "the webhook redirects (HTTP 302) to /elsewhere" in str(caught.value)
    assert [request["path"] for request in server.requests] == ["/hook"]


def test_a_server_that_streams_forever_is_cut_off_at_the_deadline():
    def trickle(handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()  # no length: the body ends when the server closes, which it never does
        while True:
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.05)

    with Server(trickle) as server:
        started = time.monotonic()
        with pytest.raises(outbound.OutboundError, match=r"did not finish within 0.6 s") as caught:
            _post(server.url, timeout=2, deadline=0.6)
        elapsed = time.monotonic() - started
    assert caught.value.kind == outbound.TIMEOUT
    # Every read got a byte within the read timeout, so only the deadline stops it (without one it would
    # run on forever); the upper bound is loose because a loaded machine schedules the thread late.
    assert 0.5 < elapsed < 5


def test_a_server_that_never_answers_is_a_timeout_and_not_retried_by_default():
    def silent(handler) -> None:
        time.sleep(2)

    with Server(silent) as server:
        with pytest.raises(outbound.OutboundError, match=r"no answer within 0.3 s") as caught:
            _post(server.url, timeout=0.3)
    assert caught.value.kind == outbound.TIMEOUT and len(server.requests) == 1


def test_a_huge_body_is_stopped_at_the_cap_whether_declared_or_not():
    declared_size = 10 * 1024 * 1024

    def declared(handler) -> None:
        _send(handler, 200, headers={"Content-Length": str(declared_size)})
        handler.wfile.write(b"x" * 65536)

    def undeclared(handler) -> None:
        handler.send_response(200)
        handler.end_headers()
        for _ in range(160):  # 10 MiB, no length
            handler.wfile.write(b"x" * 65536)

    for reply in (declared, undeclared):
        with Server(reply) as server:
            with pytest.raises(outbound.OutboundError, match="larger than 100000 bytes") as caught:
                _post(server.url, max_bytes=100_000, target="the pipeline")
        assert caught.value.kind == outbound.TOO_LARGE


def test_the_body_limit_defaults_to_the_setting(settings):
    settings.OUTBOUND_MAX_RESPONSE_BYTES = 2048
    with Server(lambda handler: _send(handler, 200, b"y" * 4096)) as server:
        with pytest.raises(outbound.OutboundError, match="larger than 2048 bytes"):
            _post(server.url)
        settings.OUTBOUND_MAX_RESPONSE_BYTES = 8192
        assert len(_post(server.url).body) == 4096


def test_an_error_status_is_a_failure_with_an_excerpt_and_only_connect_failures_are_retried():
    with Server(lambda handler: _send(handler, 503, b"down for maintenance")) as server:
        with pytest.raises(outbound.OutboundError, match="HTTP 503 from the endpoint: down for maintenance") as caught:
            _post(server.url, sleep=lambda s: None)
    assert caught.value.status == 503 and caught.value.transient and len(server.requests) == 1

    with Server(ok) as server:
        url = server.url
    pauses: list[float] = []
    with pytest.raises(outbound.OutboundError, match=r"could not reach the endpoint.*gave up after 3 tries") as caught:
        _post(url, sleep=pauses.append)
    assert caught.value.kind == outbound.CONNECT and pauses == [0.25, 0.5]


def test_a_caller_may_retry_transient_statuses_too():
    replies = iter([500, 429, 200])

    def flaky(handler) -> None:
        _send(handler, next(replies), b"{}")

    retry = outbound.Retry(tries=3, backoff=0.0, on=outbound.IDEMPOTENT)
    with Server(flaky) as server:
        assert _post(server.url, retry=retry, sleep=lambda s: None).status == 200
    assert len(server.requests) == 3


def test_environment_proxies_are_ignored_unless_configured(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens: using it would fail
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with Server(ok) as server:
        assert _post(server.url).status == 200


class ConnectProxy:
    """A CONNECT-only forward proxy on 127.0.0.1 that records where it was asked to tunnel."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.tunnels: list[str] = []
        self.authorizations: list[str | None] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_CONNECT(self) -> None:
                proxy.tunnels.append(self.path)
                proxy.authorizations.append(self.headers.get("Proxy-Authorization"))
                if refuse:
                    self.send_response(407, "Proxy Authentication Required")
                    self.end_headers()
                    return
                host, _, port = self.path.rpartition(":")
                upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
                self.send_response(200, "Connection established")
                self.end_headers()
                sockets = [self.connection, upstream]
                while True:
                    readable, _, _ = select.select(sockets, [], [], 5)
                    if not readable:
                        break
                    for sock in readable:
                        data = sock.recv(65536)
                        if not data:
                            upstream.close()
                            return
                        (upstream if sock is self.connection else self.connection).sendall(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_configured_proxy_tunnels_to_the_checked_address_not_the_name(settings, monkeypatch):
    settings.OUTBOUND_USE_ENV_PROXY = True
    settings.OUTBOUND_ALLOWED_NETWORKS = _networks("127.0.0.1/32")
    proxy = ConnectProxy()
    monkeypatch.setenv("http_proxy", proxy.url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setattr(outbound, "resolve", lambda host, port: ["127.0.0.1"])
    try:
        with Server(ok) as server:
            response = _post(f"http://hooks.example.test:{server.port}/hook")
    finally:
        proxy.close()
    assert response.status == 200 and proxy.tunnels == [f"127.0.0.1:{server.port}"]
    assert server.requests[0]["headers"]["Host"] == f"hooks.example.test:{server.port}"


def test_a_proxy_gets_the_credentials_of_its_url_and_its_refusal_is_a_failure(settings, monkeypatch):
    settings.OUTBOUND_USE_ENV_PROXY = True
    proxy = ConnectProxy(refuse=True)
    monkeypatch.setenv("http_proxy", proxy.url.replace("http://", "http://egress:s%40cret@"))
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    try:
        with Server(ok) as server:
            with pytest.raises(outbound.OutboundError, match="refused the tunnel: 407") as caught:
                _post(server.url, retry=outbound.NO_RETRY)
    finally:
        proxy.close()
    assert caught.value.kind == outbound.CONNECT and server.requests == []
    assert proxy.authorizations == ["Basic " + base64.b64encode(b"egress:s@cret").decode()]


# ---------------------------------------------------------------------------------------------
# The egress policy


@pytest.mark.parametrize(
    "address, reason",
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("192.168.1.20", "private"),
        ("172.16.5.4", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.10.1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("224.0.0.251", "multicast"),
        ("0.0.0.0", "reserved"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "reserved"),
        ("::ffff:10.0.0.1", "private"),
    ],
)
def test_non_public_destinations_are_refused_by_default(address, reason):
    assert reason in outbound.address_refusal(address, ())


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:4700:4700::1111", "8.8.8.8"])
def test_public_destinations_are_allowed(address):
    assert outbound.address_refusal(address, ()) is None


def test_a_listed_network_allows_its_addresses_and_a_metadata_address_only_by_itself():
    allowed = _networks("10.0.0.0/8", "169.254.0.0/16", "::1/128")
    assert outbound.address_refusal("10.20.30.40", allowed) is None
    assert outbound.address_refusal("::1", allowed) is None
    assert outbound.address_refusal("169.254.10.1", allowed) is None
    assert "metadata" in outbound.address_refusal("169.254.169.254", allowed)
    assert "private" in outbound.address_refusal("192.168.0.1", allowed)
    assert outbound.address_refusal("169.254.169.254", _networks("169.254.169.254/32")) is None


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.1", "169.254.169.254"])
def test_a_host_resolving_to_a_forbidden_address_is_refused_before_any_connection(settings, monkeypatch, address):
    settings.OUTBOUND_ALLOWED_NETWORKS = ()
    monkeypatch.setattr(outbound, "resolve", lambda host, port: [address])
    with Server(ok) as server:
        with pytest.raises(outbound.OutboundError, match=f"hooks.example.test resolves to {address}") as caught:
            _post(f"http://hooks.example.test:{server.port}/hook", target="the webhook")
    assert caught.value.kind == outbound.REFUSED and "refused to call the webhook" in str(caught.value)
    assert not caught.value.transient and server.requests == []


def test_an_address_in_the_url_itself_is_checked_too(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ()
    with Server(ok) as server:
        with pytest.raises(outbound.OutboundError, match="loopback"):
            _post(server.url)
    assert server.requests == []


def test_a_listed_network_lets_the_call_through_to_the_checked_address_with_the_original_host(settings, monkeypatch):
    settings.OUTBOUND_ALLOWED_NETWORKS = _networks("127.0.0.0/8")
    lookups: list[str] = []

    def rebinding_resolver(host: str, port: int) -> list[str]:
        lookups.append(host)  # a second lookup would get the metadata address: DNS rebinding
        return ["127.0.0.1"] if len(lookups) == 1 else ["169.254.169.254"]

    monkeypatch.setattr(outbound, "resolve", rebinding_resolver)
    with Server(ok) as server:
        response = _post(f"http://hooks.example.test:{server.port}/hook")
    assert response.status == 200 and lookups == ["hooks.example.test"]
    assert server.requests[0]["headers"]["Host"] == f"hooks.example.test:{server.port}"


def test_only_the_permitted_addresses_of_a_host_are_connected_to(settings, monkeypatch):
    settings.OUTBOUND_ALLOWED_NETWORKS = _networks("127.0.0.1/32")
    monkeypatch.setattr(outbound, "resolve", lambda host, port: ["169.254.169.254", "10.0.0.1", "127.0.0.1"])
    with Server(ok) as server:
        assert _post(f"http://hooks.example.test:{server.port}/hook").status == 200


@pytest.mark.parametrize(
    "url, message",
    [
        ("ftp://example.org/x", "must be http"),
        ("http://user:pw@example.org/x", "carries credentials"),
        ("http://example.org:99999/x", "not valid"),
        ("/relative", "must be http"),
    ],
)
def test_urls_the_client_cannot_call_are_refused_plainly(url, message):
    with pytest.raises(outbound.OutboundError, match=message) as caught:
        _post(url)
    assert caught.value.kind == outbound.INVALID_URL


def test_a_header_that_would_split_the_request_is_refused_before_any_connection():
    with Server(ok) as server:
        with pytest.raises(outbound.OutboundError, match="not one line") as caught:
            outbound.post(server.url, b"{}", headers={"X-Key": "a\r\nX-Injected: 1"}, timeout=1)
    assert caught.value.kind == outbound.INVALID_HEADER and server.requests == []


# ---------------------------------------------------------------------------------------------
# The setting


def test_the_allowed_networks_are_parsed_strictly(monkeypatch):
    monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", " 10.0.0.0/8, 127.0.0.1 ,::1/128,")
    assert env_networks("OUTBOUND_ALLOWED_NETWORKS") == _networks("10.0.0.0/8", "127.0.0.1/32", "::1/128")
    monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", "")
    assert env_networks("OUTBOUND_ALLOWED_NETWORKS") == ()
    for bad in ("10.0.0.0/33", "intranet", "10.0.0.1/8", "10.0.0.0/8;192.168.0.0/16"):
        monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", bad)
        with pytest.raises(ConfigError, match="OUTBOUND_ALLOWED_NETWORKS"):
            env_networks("OUTBOUND_ALLOWED_NETWORKS")


# ---------------------------------------------------------------------------------------------
# https: the checked address is connected to, the name is what TLS checks


def _certificate(tmp_path, name: str):
    """A self-signed certificate for `name` (its own CA) and its key, as PEM files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.mark.parametrize("served_name, ok_expected", [("hooks.example.test", True), ("other.example.test", False)])
def test_https_goes_to_the_checked_address_and_verifies_the_urls_name(
    settings, monkeypatch, tmp_path, served_name, ok_expected
):
    import ssl

    cert_path, key_path = _certificate(tmp_path, served_name)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_path, key_path)
    seen_names: list[str | None] = []
    server_context.sni_callback = lambda sock, name, context: seen_names.append(name)

    settings.OUTBOUND_ALLOWED_NETWORKS = _networks("127.0.0.1/32")
    monkeypatch.setattr(outbound, "tls_context", lambda: ssl.create_default_context(cafile=str(cert_path)))
    monkeypatch.setattr(outbound, "resolve", lambda host, port: ["127.0.0.1"])
    with Server(ok) as server:
        server.server.socket = server_context.wrap_socket(server.server.socket, server_side=True)
        url = f"https://hooks.example.test:{server.port}/hook"
        if ok_expected:
            assert _post(url).status == 200
            assert server.requests[0]["headers"]["Host"] == f"hooks.example.test:{server.port}"
        else:
            pauses: list[float] = []
            with pytest.raises(outbound.OutboundError, match="certificate") as caught:
                _post(url, sleep=pauses.append)
            assert caught.value.kind == outbound.TLS and server.requests == [] and pauses == []
    assert seen_names and seen_names[0] == "hooks.example.test"
