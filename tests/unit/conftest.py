"""Fixtures of the engine's unit tests (test_engine, test_events)."""
import pytest

from streamer import config
from streamer.engine.supervisor import Supervisor
from streamer.ops.metrics import Metrics
from tests.unit.engine_parts import FakeClock, InMemoryPublisher


@pytest.fixture
def make(tmp_path):
    def make(batch=None, heartbeat=False, clock=None, topics=None, columns=None,
             supervised=False, sections=None, hosts=None, **publisher_args):
        """(the engine's Streamer, or with ``supervised`` its Supervisor, and the publisher)."""
        path = tmp_path / "streamer.yaml"
        (tmp_path / "pw").write_text("unused: nothing connects\n")
        path.write_text("namespace: test\nsource: {name: src}\n"
                        "mysql: {server_id: 99, password_file: pw"
                        + (f", hosts: [{', '.join(hosts)}]" if hosts else "") + "}\n"
                        "tables: {include: ['app.*']}\n")
        cfg = config.load(str(path), environ={})
        cfg["batch"].update(batch or {})
        cfg["topics"].update(topics or {})
        cfg["tables"]["columns"].update(columns or {})
        for section, value in (sections or {}).items():  # whole sections, e.g. the format
            cfg[section] = dict(cfg[section], **value) if isinstance(value, dict) else value
        publisher = InMemoryPublisher(**publisher_args)
        supervisor = Supervisor(cfg, metrics=Metrics(cfg, heartbeat=heartbeat),
                                publisher=lambda _: publisher, clock=clock or FakeClock())
        supervisor.publisher = publisher
        return (supervisor if supervised else supervisor.streamer), publisher
    return make
