"""How the registry client names a failure: one it can wait out (RegistryUnavailable: the engine
resumes from the checkpoint and tries again) or one a person must fix (RegistryError: the
streamer stops naming it), against a local HTTP stand-in answering each way."""
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from streamer.codec.schema_registry import SchemaRegistry
from streamer.errors import RegistryError, RegistryUnavailable

SCHEMA = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}


@pytest.fixture
def answering():
    """A stand-in that answers every POST and GET with the status and body the test sets; status 0
    closes the connection without an answer (a proxy dropping it)."""
    answer = {"status": 200, "body": b'{"id": 3}'}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            if answer["status"] == 0:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response(answer["status"])
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer["body"])

        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(answer["status"])
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer["body"])

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield SchemaRegistry(f"http://127.0.0.1:{server.server_port}", timeout_s=5), answer
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 429])
def test_an_answer_that_it_can_t_serve_now_is_waited_out(answering, status):
    registry, answer = answering
    answer.update(status=status, body=b'{"error_code": 50003, "message": "store timeout"}')
    with pytest.raises(RegistryUnavailable, match=f"answered {status}: .*store timeout"):
        registry.register("t-value", SCHEMA)
    answer.update(status=200, body=b'{"id": 3}')
    assert registry.register("t-value", SCHEMA) == 3  # nothing was cached from the failure


@pytest.mark.parametrize("status, said", [
    (409, "compatibility rule rejects this schema change"),
    (422, "answered 422"),
    (401, "check schema_registry.auth"),
    (404, "answered 404"),
])
def test_an_answer_a_person_must_act_on_stops_naming_it(answering, status, said):
    registry, answer = answering
    answer.update(status=status, body=b'{"error_code": 1, "message": "no"}')
    with pytest.raises(RegistryError, match=said) as raised:
        registry.register("t-value", SCHEMA)
    assert not isinstance(raised.value, RegistryUnavailable)


def test_a_connection_dropped_without_an_answer_is_waited_out(answering):
    registry, answer = answering
    answer["status"] = 0
    with pytest.raises(RegistryUnavailable, match="is not reachable .*check schema_registry.url"):
        registry.register("t-value", SCHEMA)


def test_nothing_listening_is_waited_out():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(RegistryUnavailable, match=f"at http://127.0.0.1:{port} is not reachable"):
        SchemaRegistry(f"http://127.0.0.1:{port}").register("t-value", SCHEMA)


def test_an_answer_that_is_not_json_names_the_url_to_check(answering):
    registry, answer = answering
    answer["body"] = b"<html>a web server's page</html>"
    with pytest.raises(RegistryError, match="answered what is not JSON .*is schema_registry.url "
                                            "the registry's API") as raised:
        registry.register("t-value", SCHEMA)
    assert not isinstance(raised.value, RegistryUnavailable)


@pytest.mark.parametrize("body", [b'{}', b'[]', b'3', b'{"id": "three"}', b'{"id": null}',
                                  b'{"id": true}', b'{"id": 3.5}', b'{"error_code": 0}'])
def test_json_without_a_schema_id_names_what_was_answered(answering, body):
    registry, answer = answering
    answer["body"] = body
    with pytest.raises(RegistryError, match="answered .* without a schema id .*is "
                                            "schema_registry.url the registry's API") as raised:
        registry.register("t-value", SCHEMA)
    assert not isinstance(raised.value, RegistryUnavailable)
    answer["body"] = b'{"id": 3}'
    assert registry.register("t-value", SCHEMA) == 3  # nothing was cached from the answer


@pytest.mark.parametrize("body", [b'{}', b'{"schema": 5}', b'{"schema": "not json"}',
                                  b'{"schema": "[1]"}', b'["a"]'])
def test_a_schema_fetched_by_id_that_is_not_a_schema_names_the_id(answering, body):
    registry, answer = answering
    answer["body"] = body
    with pytest.raises(RegistryError, match="schema id 7 .*without an Avro schema") as raised:
        registry.schema(7)
    assert not isinstance(raised.value, RegistryUnavailable)
    answer["body"] = b'{"schema": "{\\"type\\": \\"int\\"}"}'
    assert registry.schema(7) == {"type": "int"}


def test_the_default_compatibility_is_read_and_a_wrong_url_is_named(answering):
    registry, answer = answering
    answer["body"] = b'{"compatibilityLevel": "BACKWARD"}'
    assert registry.compatibility() == "BACKWARD"
    answer["body"] = b'{"status": "ok"}'
    with pytest.raises(RegistryError, match="without a compatibilityLevel: is "
                                            "schema_registry.url the registry's API"):
        registry.compatibility()
    # A web server's 404 (not the registry API's, which carries an error_code) names the URL.
    answer.update(status=404, body=b"<html>Not Found</html>")
    with pytest.raises(RegistryError, match=r"answered 404: .*\(no such resource: is "
                                            r"schema_registry.url the registry's API\? "
                                            r"Apicurio's is .../apis/ccompat/v7\)"):
        registry.compatibility()
    answer.update(status=404, body=b'{"error_code": 40403, "message": "Schema not found"}')
    with pytest.raises(RegistryError) as raised:
        registry.schema(12)
    assert "Schema not found" in str(raised.value) and "no such resource" not in str(raised.value)


def test_streamer_check_has_a_line_for_the_registry(answering):
    # `streamer check` said nothing of the registry: a wrong URL, a bad CA or refused credentials
    # showed only when the first table's schema was registered, in the running stream.
    from streamer import cli, config

    registry, answer = answering
    cfg = config.build({"mysql": {"server_id": 7}, "schema_registry": {"url": registry.url}})
    answer["body"] = b'{"compatibilityLevel": "FULL"}'
    where, ok, said = cli._registry_check(cfg)
    assert (where, ok) == (f"schema registry {registry.url}", True)
    assert "default compatibility FULL" in said
    answer.update(status=401, body=b'{"error_code": 401, "message": "no"}')
    where, ok, said = cli._registry_check(cfg)
    assert not ok and "check schema_registry.auth" in said
