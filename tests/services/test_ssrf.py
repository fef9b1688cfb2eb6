"""The SSRF guard: refused addresses, the allow-list, redirects, and connect-time pinning."""

from __future__ import annotations

import httpx
import pytest

from idee_notebook_agent.errors import ServiceError
from idee_notebook_agent.services.ssrf import (
    BlockedURLError,
    Policy,
    _GuardedBackend,
    check_url,
    guarded_async_client,
    guarded_client,
)
from tests.services.conftest import make_settings


@pytest.fixture
def closed(tmp_path):
    """Settings with no exception: only public addresses."""
    return make_settings(tmp_path, allow_hosts="")


@pytest.fixture
def open_loopback(tmp_path):
    return make_settings(tmp_path, allow_hosts="127.0.0.1")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.0.0.1:8080/admin",
        "http://10.0.0.5/",
        "http://10.255.1.1:9200/_cat",
        "http://192.168.1.1/",
        "http://172.16.3.4/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fd00:ec2::254]/",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
        "http://100.100.100.200/",
        "http://2130706433/",
        "http://localhost/",
        "http://LOCALHOST./",
        "http://metadata.google.internal/computeMetadata/v1/",
    ],
)
def test_non_public_addresses_are_refused(closed, url):
    with pytest.raises(BlockedURLError):
        check_url(url, closed)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.org/x", "gopher://x/", "javascript:alert(1)", ""]
)
def test_only_http_and_https(closed, url):
    with pytest.raises(BlockedURLError):
        check_url(url, closed)


def test_public_ip_literals_pass(closed):
    assert str(check_url("https://8.8.8.8/dns", closed)) == "https://8.8.8.8/dns"
    assert check_url("http://[2001:4860:4860::8888]/", closed).host == "2001:4860:4860::8888"


def test_unresolvable_host_is_a_clear_error(closed):
    with pytest.raises(ServiceError, match="resolver"):
        check_url("http://no-existe.invalid/", closed)


def test_allow_list_by_cidr_host_and_wildcard():
    policy = Policy.from_list(["127.0.0.0/8", "intranet.example", "*.corp.example", "[::1]"])
    assert check_url("http://127.0.0.1:1234/", policy=policy)
    assert check_url("http://[::1]:9/", policy=policy)
    assert check_url("http://intranet.example/wms", policy=policy)
    assert check_url("http://a.b.corp.example/", policy=policy)
    with pytest.raises(BlockedURLError):
        check_url("http://10.0.0.1/", policy=policy)
    with pytest.raises(BlockedURLError):
        check_url("http://169.254.169.254/", policy=policy)


def test_guarded_client_refuses_before_connecting(closed, ogc_fake):
    with guarded_client(closed) as client, pytest.raises(BlockedURLError):
        client.get(ogc_fake.url("/pages/idee.html"))
    assert ogc_fake.requests == []


def test_allow_list_lets_tests_reach_the_loopback_fake(open_loopback, ogc_fake):
    with guarded_client(open_loopback) as client:
        response = client.get(ogc_fake.url("/pages/plain.txt"))
    assert response.status_code == 200
    assert "Texto plano" in response.text


@pytest.mark.parametrize(
    "target",
    [
        "http://10.0.0.7/secret",
        "http://169.254.169.254/latest/meta-data/iam/",
        "http://[::1]:22/",
        "file:///etc/passwd",
    ],
)
def test_redirect_from_allowed_host_to_private_one_is_refused(open_loopback, ogc_fake, target):
    with guarded_client(open_loopback) as client, pytest.raises(BlockedURLError):
        client.get(ogc_fake.url("/redirect"), params={"to": target})
    assert [p for _, p, _ in ogc_fake.requests] == ["/redirect"]


def test_redirect_between_allowed_addresses_is_followed(open_loopback, ogc_fake):
    with guarded_client(open_loopback) as client:
        response = client.get(
            ogc_fake.url("/redirect"), params={"to": ogc_fake.url("/pages/plain.txt")}
        )
    assert response.status_code == 200 and "Texto plano" in response.text


async def test_async_client_checks_redirects_too(open_loopback, ogc_fake):
    async with guarded_async_client(open_loopback) as client:
        with pytest.raises(BlockedURLError):
            await client.get(ogc_fake.url("/redirect"), params={"to": "http://192.168.0.1/"})
        ok = await client.get(ogc_fake.url("/pages/plain.txt"))
    assert ok.status_code == 200


def test_connect_time_backend_refuses_non_public_addresses(ogc_fake):
    """The pinned network backend checks again when the socket opens (DNS rebinding)."""
    backend = _GuardedBackend(httpx.HTTPTransport()._pool._network_backend, Policy())
    with pytest.raises(BlockedURLError):
        backend.connect_tcp("127.0.0.1", ogc_fake.port)
    allowed = _GuardedBackend(
        httpx.HTTPTransport()._pool._network_backend, Policy.from_list(["127.0.0.1"])
    )
    stream = allowed.connect_tcp("127.0.0.1", ogc_fake.port, timeout=2)
    stream.close()
