"""pymysql's preferred-TLS context is built once per process, and nothing else about TLS changes."""
import ssl

import pymysql

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
