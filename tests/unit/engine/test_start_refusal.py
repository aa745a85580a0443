"""The MySQL errors that end a start at once (engine.start.refusal), each naming its fix."""
import pymysql
import pytest

from streamer import config
from streamer.engine.start import refusal


def _mysql(mode):
    return config.build({"mysql": {"server_id": 9, "tls": {"mode": mode}}}).mysql


DENIED = pymysql.err.OperationalError(1045, "Access denied for user 'streamer'@'127.0.0.1' "
                                            "(using password: YES)")
TLS_FIX = "set mysql.tls.mode to required, verify_ca or verify_identity"


def test_a_login_denied_without_tls_names_an_account_that_requires_it_as_a_cause():
    said = str(refusal(DENIED, _mysql("disabled")))
    assert "refused the streamer's user 'streamer': Access denied" in said
    assert "Check mysql.user and mysql.password_file" in said
    assert "REQUIRE SSL or X509" in said and TLS_FIX in said


@pytest.mark.parametrize("mode", ["preferred", "required"])
def test_over_tls_a_login_denied_is_the_user_or_password(mode):
    said = str(refusal(DENIED, _mysql(mode)))
    assert "Check mysql.user and mysql.password_file" in said and "REQUIRE SSL" not in said


@pytest.mark.parametrize("code,words", [
    (3118, "and is not locked"),  # MySQL's locked account
    (4151, "and is not locked"),  # MariaDB's
    (3159, "takes only connections over TLS (require_secure_transport is ON)"),
    (1227, "lacks a privilege"),
])
def test_each_refusal_no_retry_fixes_names_its_cause(code, words):
    said = str(refusal(pymysql.err.OperationalError(code, "the server's words"),
                       _mysql("disabled")))
    assert words in said and "the server's words" in said
    assert "REQUIRE SSL" not in said


@pytest.mark.parametrize("code", [2003, 2013, 1040, 3032])
def test_what_may_pass_is_no_refusal(code):
    # Unreachable, lost, too many connections, offline mode: the start waits and tries again.
    assert refusal(pymysql.err.OperationalError(code, "x"), _mysql("disabled")) is None
