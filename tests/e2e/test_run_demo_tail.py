"""What `make run` puts together: the local default config, the demo writer and `streamer tail`."""
import json
import os
import random
import subprocess
import sys

from tests import support


def test_local_config_streams_the_demo_load_and_tail_decodes_it(tmp_path):
    cfg = str(tmp_path / "streamer.yaml")
    subprocess.run([os.path.join(support.ROOT, "deploy/local/config.sh"), cfg], check=True,
                   capture_output=True)
    ns = support.unique("demo")
    env = dict(os.environ, STREAMER__NAMESPACE=ns, STREAMER__SOURCE__NAME=ns,
               STREAMER__MYSQL__SERVER_ID=str(random.randint(100000, 200000)),
               STREAMER__MYSQL__PASSWORD_FILE=os.path.join(support.LOCAL, "secrets", "streamer.password"))
    with support.StreamerProcess(cfg, str(tmp_path / "log"), env=env) as proc:
        support.wait_for(lambda: support.end_offsets(f"{ns}.__positions"), timeout=60,
                         what="the streamer's first checkpoint")
        demo = subprocess.run(
            [sys.executable, "-m", "streamer.tools.demo", "--config", cfg, "--seconds", "2", "--rate", "20",
             "--admin-password-file", os.path.join(support.LOCAL, "secrets", "admin.password")],
            cwd=support.ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert demo.returncode == 0, demo.stderr
        assert f"streamer tail {ns}.demo.orders" in demo.stdout
        tail = subprocess.run(
            [sys.executable, "-m", "streamer.cli", "tail", f"{ns}.demo.orders", "--max", "5",
             "--idle-exit", "30"], cwd=support.ROOT, capture_output=True, text=True, timeout=90)
        assert proc.stop() == 0, proc.output()[-2000:]
    assert tail.returncode == 0, tail.stderr
    lines = [json.loads(line) for line in tail.stdout.splitlines()]
    assert len(lines) == 5
    for line in lines:
        assert line["topic"] == f"{ns}.demo.orders"
        assert set(line["key"]) == {"id"}
        if line["value"] is None:  # the tombstone after a delete of the demo's
            assert line["tombstone"] is True
            continue
        assert line["value"]["op"] in ("c", "u", "d")
        row = line["value"]["after"] or line["value"]["before"]
        assert row["customer"] in ("ada", "grace", "linus", "barbara")
        assert line["value"]["source"]["db"] == "demo"
