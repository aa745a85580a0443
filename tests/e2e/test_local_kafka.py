"""The local broker's own log (deploy/local/kafka.sh) rolls by size instead of growing forever."""
import subprocess

import pytest

from tests.e2e.servers import PrivateKafka

# Private brokers only.
pytestmark = pytest.mark.private_servers


def test_a_log_past_its_size_rolls_at_start_and_the_start_is_still_seen(tmp_path):
    base = tmp_path / "kafka"
    kafka = PrivateKafka(str(base))
    line = "[earlier] INFO a line from an earlier run\n"
    (base / "server.log").write_text(line * (11 * 1024 * 1024 // len(line) + 1))
    kafka.env["STREAMER_KAFKA_LOG_ROLL_MB"] = "10"
    # The readiness check reads the log from where it ended before the start; the roll leaves a
    # shorter file, which it must then read from its top.
    with kafka:
        current = (base / "server.log").read_text()
        assert "Kafka Server started" in current
        assert "[earlier]" not in current
        assert (base / "server.log.1").read_text().startswith(line)


def test_a_roll_size_too_small_for_a_start_is_refused_with_the_reason(tmp_path):
    kafka = PrivateKafka(str(tmp_path / "kafka"))
    for bad in ("1", "ten"):
        out = subprocess.run([kafka.script, "up"], env=dict(kafka.env, STREAMER_KAFKA_LOG_ROLL_MB=bad),
                             capture_output=True, text=True)
        assert out.returncode == 1
        assert f"STREAMER_KAFKA_LOG_ROLL_MB must be a whole number of MB, 10 or more, not '{bad}'" \
            in out.stderr
    assert not (tmp_path / "kafka" / "server.properties").exists()  # refused before configuring
