"""TLS to MySQL: pymysql's preferred-TLS context is built once per process, and mysql.tls gives
every connection its mode, CA and client certificate."""
import ssl

import pymysql
import pytest

from streamer.source import patches, server


def deferred(**kw):
    return server.Connection(host="127.0.0.1", port=1, user="u", password="p", defer_connect=True,
                             **kw)


def test_connections_without_tls_options_share_one_unverified_context():
    a, b = deferred(), deferred()
    assert a.ssl and not a._ssl_required  # still preferred: used if the server offers TLS
    assert a.ctx is b.ctx
    assert a.ctx.verify_mode == ssl.CERT_NONE and not a.ctx.check_hostname


def test_explicit_tls_options_still_get_their_own_context():
    a = deferred(ssl={"check_hostname": False, "verify_mode": "optional"})
    b = deferred(ssl={"check_hostname": False, "verify_mode": "optional"})
    assert a._ssl_required and a.ctx is not b.ctx and a.ctx is not deferred().ctx
    assert a.ctx.verify_mode == ssl.CERT_OPTIONAL


def test_disabled_tls_builds_no_context():
    c = deferred(ssl_disabled=True)
    assert not c.ssl and getattr(c, "ctx", None) is None


def test_pymysqls_own_connection_is_left_as_it_is():
    # A subclass, not a patch: applying the library fixes replaces nothing of pymysql's.
    before = pymysql.connections.Connection._create_ssl_ctx
    patches.apply()
    assert pymysql.connections.Connection._create_ssl_ctx is before
    assert not hasattr(pymysql.connections.Connection._create_ssl_ctx, "__wrapped__")
    plain = pymysql.connect(host="127.0.0.1", port=1, user="u", password="p", defer_connect=True)
    assert plain.ctx is not deferred().ctx


def test_the_shared_context_is_pymysqls_less_the_ca_bundle():
    ours = deferred().ctx
    theirs = pymysql.connections.Connection._create_ssl_ctx(deferred(), {})
    for attr in ("protocol", "verify_mode", "check_hostname", "options", "verify_flags",
                 "minimum_version", "maximum_version"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    # The bundle pymysql loads goes unread with verification off; ours doesn't load it.
    assert theirs.cert_store_stats()["x509_ca"] > 0
    assert ours.cert_store_stats()["x509_ca"] == 0


def _cfg(tmp_path, **tls):
    from streamer import config

    path = tmp_path / "c.yaml"
    import yaml
    path.write_text(yaml.safe_dump({"mysql": {"server_id": 1, "tls": tls}}))
    return config.load(str(path), environ={})


def _ca(tmp_path):
    import subprocess

    cert, key = tmp_path / "ca.pem", tmp_path / "ca-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=streamer-test-ca"],
                   check=True, capture_output=True)
    return cert, key


def test_each_tls_mode_gives_every_connection_its_options(tmp_path):
    cert, key = _ca(tmp_path)
    assert server.tls_options(_cfg(tmp_path, mode="preferred")) == {}
    off = deferred(**server.tls_options(_cfg(tmp_path, mode="disabled")))
    assert not off.ssl
    req = deferred(**server.tls_options(_cfg(tmp_path, mode="required")))
    assert req._ssl_required and req.ctx.verify_mode == ssl.CERT_NONE and not req.ctx.check_hostname
    ca = deferred(**server.tls_options(_cfg(tmp_path, mode="verify_ca", ca="ca.pem")))
    assert ca._ssl_required and ca.ctx.verify_mode == ssl.CERT_REQUIRED and not ca.ctx.check_hostname
    assert ca.ctx.cert_store_stats()["x509_ca"] == 1  # the given CA, and only it
    ident = deferred(**server.tls_options(_cfg(tmp_path, mode="verify_identity", ca=str(cert),
                                                cert=str(cert), key=str(key))))
    assert ident.ctx.verify_mode == ssl.CERT_REQUIRED and ident.ctx.check_hostname
    # The heartbeat writer's own connection gets the same options.
    from streamer.ops.heartbeat import credentials
    cfg = _cfg(tmp_path, mode="verify_ca", ca=str(cert))
    assert credentials(cfg, {"STREAMER_MYSQL_PASSWORD": "pw"})["ssl"] is \
        server.tls_options(cfg)["ssl"]


def test_tls_settings_that_cannot_work_are_config_errors_naming_the_key(tmp_path):
    from streamer.errors import ConfigError

    for tls, message in (({"mode": "strict"}, "mysql.tls.mode"),
                         ({"mode": "verify_identity"}, "set 'mysql.tls.ca'"),
                         ({"mode": "required", "cert": "c.pem"}, "go together"),
                         ({"mode": "preferred", "cert": "c.pem", "key": "k.pem"}, "needs")):
        with pytest.raises(ConfigError, match=message):
            _cfg(tmp_path, **tls)
    with pytest.raises(ConfigError, match="mysql.tls.ca': cannot load"):
        server.tls_options(_cfg(tmp_path, mode="verify_ca", ca="missing.pem"))
