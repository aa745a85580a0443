"""The shipped dashboard and alert rules (deploy/monitoring): promtool checks the rules and runs
their tests (series that should and should not fire); every series they use is one the streamer
exposes (here against the collector; against a running streamer's /metrics in
tests/e2e/test_metrics.py)."""
import json
import os
import re
import shutil
import subprocess


from tests.unit.ops.prom_series import exposed_names

MONITORING = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "deploy", "monitoring")
SERIES = re.compile(r"\b((?:streamer|process)_[a-z_]+)")


def used_series():
    """Every series name the dashboard's queries and the rules' expressions use."""
    with open(os.path.join(MONITORING, "dashboard.json")) as fh:
        dashboard = json.load(fh)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    with open(os.path.join(MONITORING, "alerts.yml")) as fh:
        exprs.append(fh.read())
    return {m.group(1) for e in exprs for m in SERIES.finditer(e)}


def promtool():
    found = shutil.which("promtool")
    assert found, "promtool is missing: deploy/local/deps.sh installs Debian's prometheus package"
    return found


def test_the_alert_rules_are_valid():
    out = subprocess.run([promtool(), "check", "rules", "alerts.yml"], cwd=MONITORING,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "9 rules found" in out.stdout


def test_the_alerts_fire_on_what_should_fire_them_and_only_on_that():
    out = subprocess.run([promtool(), "test", "rules", "alerts_test.yml"], cwd=MONITORING,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout + out.stderr


def test_a_rule_test_that_should_fail_fails(tmp_path):
    # The harness itself: an alert expected where none fires is a failure promtool reports.
    shutil.copy(os.path.join(MONITORING, "alerts.yml"), tmp_path / "alerts.yml")
    (tmp_path / "wrong.yml").write_text(
        "rule_files: [alerts.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n"
        "    input_series:\n      - series: 'streamer_lag_seconds{namespace=\"a\",source=\"b\","
        "environment=\"e\"}'\n        values: '0x10'\n    alert_rule_test:\n"
        "      - eval_time: 9m\n        alertname: StreamerLagging\n        exp_alerts:\n"
        "          - exp_labels: {severity: warning, namespace: a, source: b, environment: e}\n")
    out = subprocess.run([promtool(), "test", "rules", "wrong.yml"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode != 0


def test_every_series_the_dashboard_and_rules_use_is_one_the_streamer_exposes():
    names = exposed_names()
    used = used_series()
    assert used, "no series found in deploy/monitoring"
    missing = sorted(u for u in used if u not in names)
    assert missing == []
