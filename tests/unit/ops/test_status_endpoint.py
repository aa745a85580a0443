"""The status endpoint under requests that go wrong: a scraper that hangs up before its answer,
and a page that fails to render. Each is one log line (the logs may be JSON, read by machines),
never a traceback on stderr, and a failed page still gets an answer."""
import json
import logging
import socket
import struct
import time
import urllib.error
import urllib.request

import pytest

from streamer import config
from streamer.ops.httpstatus import StatusServer
from streamer.ops.metrics import Metrics


class SlowMetrics(Metrics):
    """Metrics whose /status takes a while, or fails, as the test sets."""
    delay_s = 0.0
    fails = False

    def status(self):
        time.sleep(self.delay_s)
        if self.fails:
            raise RuntimeError("a counter went missing")
        return super().status()


@pytest.fixture
def endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = config.build({"mysql": {"server_id": 7}, "metrics": {"http_port": port}})
    metrics = SlowMetrics(cfg)
    with StatusServer(cfg, metrics):
        yield f"http://127.0.0.1:{port}", metrics


def test_a_page_that_fails_answers_500_naming_why_in_one_line(endpoint, caplog, capfd):
    url, metrics = endpoint
    metrics.fails = True
    with caplog.at_level(logging.WARNING, logger="streamer.ops.httpstatus"):
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(url + "/status", timeout=5)
        assert raised.value.code == 500
        body = json.loads(raised.value.read())
    assert "a counter went missing" in body["error"]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "/status" in said[0] and "a counter went missing" in said[0], said
    assert capfd.readouterr().err == ""
    metrics.fails = False  # the endpoint goes on serving
    with urllib.request.urlopen(url + "/status", timeout=5) as resp:
        assert "position" in json.loads(resp.read())


def test_a_client_that_hangs_up_before_its_answer_leaves_no_traceback(endpoint, caplog, capfd):
    url, metrics = endpoint
    metrics.delay_s = 0.3
    port = int(url.rsplit(":", 1)[1])
    with caplog.at_level(logging.WARNING, logger="streamer.ops.httpstatus"):
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port)) as c:
                c.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
                # closed at once with a reset, while the page is still being made
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        time.sleep(1.0)
    assert caplog.records == []  # a scraper's timeout is not the streamer's problem
    assert capfd.readouterr().err == ""
    metrics.delay_s = 0.0
    with urllib.request.urlopen(url + "/status", timeout=5) as resp:
        assert "position" in json.loads(resp.read())  # and the endpoint still serves
