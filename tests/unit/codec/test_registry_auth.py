"""schema_registry.auth against a registry stand-in over HTTPS that asks for a client certificate
and checks the Authorization header: basic, bearer and mutual TLS, secrets never shown."""
import base64
import json
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from streamer import config
from streamer.codec.schema_registry import Auth, SchemaRegistry, auth_from_config
from streamer.errors import RegistryError

SCHEMA = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}


def _openssl(cwd, *args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=cwd)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by it."""
    d = tmp_path_factory.mktemp("pki")
    _openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.pem", "-days", "2", "-subj", "/CN=test-ca")
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
        _openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                 f"{name}.csr", "-subj", f"/CN={name}")
        (d / f"{name}.ext").write_text(ext + "\n")
        _openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")
    return {n: str(d / n) for n in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


@pytest.fixture
def registry(certs):
    """An HTTPS registry stand-in: it requires a client certificate signed by the CA and answers
    POST .../versions with id 7 when the Authorization header is the expected one."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        expected = None

        def do_POST(self):  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, self.headers.get("Authorization"), body))
            ok = self.headers.get("Authorization") == Handler.expected
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"id": 7} if ok else {"error_code": 401,
                                                             "message": "unauthorized"}).encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs["server.pem"], certs["server.key"])
    ctx.load_verify_locations(certs["ca.pem"])
    ctx.verify_mode = ssl.CERT_REQUIRED
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", Handler, seen
    finally:
        server.shutdown()
        server.server_close()


def _auth(certs, **auth):
    auth["tls"] = {"ca": certs["ca.pem"], "cert": certs["client.pem"], "key": certs["client.key"]}
    return config.build({"mysql": {"server_id": 9},
                         "schema_registry": {"url": "https://r", "auth": auth}}).schema_registry


def test_basic_auth_over_mutual_tls_registers_and_the_password_is_never_shown(certs, registry):
    url, handler, seen = registry
    handler.expected = "Basic " + base64.b64encode(b"streamer:s3cr:t").decode()
    auth = auth_from_config(_auth(certs, mode="basic", user="streamer"),
                            environ={"STREAMER_REGISTRY_PASSWORD": "s3cr:t"})
    assert "s3cr" not in repr(auth) and repr(auth) == "Auth(basic, client certificate)"
    assert SchemaRegistry(url, 5.0, auth).register("ns.db.t-value", SCHEMA) == 7
    assert seen[0][0] == "/subjects/ns.db.t-value/versions" and seen[0][1] == handler.expected


def test_bearer_token_from_a_file(certs, registry, tmp_path):
    url, handler, _ = registry
    token = tmp_path / "token"
    token.write_text("tok-123\n")
    token.chmod(0o600)
    handler.expected = "Bearer tok-123"
    auth = auth_from_config(_auth(certs, mode="bearer", token_file=str(token)), environ={})
    assert SchemaRegistry(url, 5.0, auth).register("s-value", SCHEMA) == 7


def test_refused_credentials_name_the_setting_and_not_the_secret(certs, registry):
    url, handler, _ = registry
    handler.expected = "Basic nobody"
    auth = auth_from_config(_auth(certs, mode="basic", user="streamer"),
                            environ={"STREAMER_REGISTRY_PASSWORD": "wrong-pass"})
    with pytest.raises(RegistryError) as refused:
        SchemaRegistry(url, 5.0, auth).register("s-value", SCHEMA)
    assert "answered 401" in str(refused.value) and "check schema_registry.auth" in str(refused.value)
    assert "wrong-pass" not in str(refused.value)


def test_without_the_client_certificate_the_registry_refuses_the_connection(certs, registry):
    url, handler, seen = registry
    handler.expected = None
    with pytest.raises(RegistryError, match="not reachable"):
        SchemaRegistry(url, 5.0, Auth(ca=certs["ca.pem"])).register("s-value", SCHEMA)
    assert seen == []


def test_a_missing_secret_or_a_wrong_mode_is_one_clear_error(certs):
    with pytest.raises(RegistryError, match="STREAMER_REGISTRY_PASSWORD"):
        auth_from_config(_auth(certs, mode="basic", user="u"), environ={})
    with pytest.raises(RegistryError, match="STREAMER_REGISTRY_TOKEN"):
        auth_from_config(_auth(certs, mode="bearer"), environ={})
    with pytest.raises(config.ConfigError, match="schema_registry.auth.mode"):
        config.validate(config._merge(config.DEFAULTS, {
            "mysql": {"server_id": 9}, "schema_registry": {"url": "https://r",
                                                           "auth": {"mode": "digest"}}}))


def test_a_token_its_agent_refreshes_in_the_file_is_sent_from_the_next_request(certs, registry,
                                                                               tmp_path, caplog):
    # An OAuth token an agent refreshes before it expires: the one read at the start was sent
    # for ever, and refused once it expired (401: the stream stopped).
    url, handler, seen = registry
    token = tmp_path / "token"
    token.write_text("tok-1\n")
    auth = auth_from_config(_auth(certs, mode="bearer", token_file=str(token)), environ={})
    reg = SchemaRegistry(url, 5.0, auth)
    handler.expected = "Bearer tok-1"
    assert reg.register("a-value", SCHEMA) == 7
    (tmp_path / "new").write_text("tok-2\n")
    (tmp_path / "new").replace(token)
    handler.expected = "Bearer tok-2"  # the old one expired
    assert reg.register("b-value", SCHEMA) == 7
    token.unlink()  # mid-rotation: the one read before is sent, and that is said
    assert reg.register("c-value", SCHEMA) == 7
    assert [h for _, h, _ in seen] == ["Bearer tok-1", "Bearer tok-2", "Bearer tok-2"]
    assert "sending the registry the credentials read before" in caplog.text
    assert "tok-2" not in caplog.text


def test_credentials_from_the_environment_are_read_once(certs, registry):
    url, handler, seen = registry
    environ = {"STREAMER_REGISTRY_PASSWORD": "p1"}
    auth = auth_from_config(_auth(certs, mode="basic", user="u"), environ=environ)
    environ["STREAMER_REGISTRY_PASSWORD"] = "p2"  # a process's environment doesn't change
    handler.expected = "Basic " + base64.b64encode(b"u:p1").decode()
    assert SchemaRegistry(url, 5.0, auth).register("s-value", SCHEMA) == 7


@pytest.mark.parametrize("which", ["ca", "ca folder", "cert"])
def test_a_tls_file_that_does_not_load_is_a_config_problem_not_an_outage(certs, tmp_path, which):
    # It was an ssl.SSLError inside the request, taken for "not reachable" (RegistryUnavailable):
    # the engine waited it out and tried again, for good.
    from streamer.errors import RegistryUnavailable

    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    auth = {"ca": Auth(ca=str(junk)), "ca folder": Auth(ca=str(tmp_path)),
            "cert": Auth(ca=certs["ca.pem"], cert=str(junk), key=str(junk))}[which]
    key = "cert" if which == "cert" else "ca"
    with pytest.raises(RegistryError, match=rf"config key 'schema_registry.auth.tls.{key}': "
                                            rf"cannot load .*give a PEM file") as raised:
        SchemaRegistry("https://127.0.0.1:1", 5.0, auth).register("s-value", SCHEMA)
    assert not isinstance(raised.value, RegistryUnavailable)
    if which == "ca folder":
        assert "(a folder)" in str(raised.value)
