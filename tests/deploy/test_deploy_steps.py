"""Deploy building blocks that need no servers: env files, link switching, supervisor config."""
import os
import threading

import pytest

from streamer.deploy import rollout, service
from streamer.ops import gcpacing


def write(path, text, mode=0o600):
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, mode)
    return path


def test_env_file_readable_by_others_is_refused_with_the_fix(tmp_path):
    path = write(tmp_path / "main.env", "STREAMER_MYSQL_PASSWORD=s3cret\n", mode=0o644)
    with pytest.raises(rollout.DeployError) as err:
        rollout.read_env_file(str(path))
    assert "mode 644" in str(err.value) and f"chmod 600 {path}" in str(err.value)
    assert "s3cret" not in str(err.value)


def test_env_file_reads_like_systemd_environmentfile(tmp_path):
    path = write(tmp_path / "c.env", "# site\n\nSTREAMER__MYSQL__HOST=db1\n"
                 "STREAMER__KAFKA__BOOTSTRAP_SERVERS='k1:9092,k2:9092'\nA=\"x=y\"\n")
    assert rollout.read_env_file(str(path)) == {
        "STREAMER__MYSQL__HOST": "db1", "STREAMER__KAFKA__BOOTSTRAP_SERVERS": "k1:9092,k2:9092",
        "A": "x=y"}


def test_env_file_with_a_line_that_is_not_key_value_names_the_line(tmp_path):
    path = write(tmp_path / "c.env", "OK=1\nexport X\n")
    with pytest.raises(rollout.DeployError, match="line 2: expected KEY=VALUE"):
        rollout.read_env_file(str(path))


def test_password_file_readable_by_group_is_refused(tmp_path):
    release = tmp_path / "rel"
    (release / "env").mkdir(parents=True)
    pw = write(tmp_path / "pw", "x\n", mode=0o640)
    (release / "env" / "canary.yaml").write_text(
        f"mysql: {{server_id: 7, password_file: {pw}}}\nmetrics: {{http_port: 9999}}\n")
    with pytest.raises(rollout.DeployError, match="mysql.password_file.*chmod 600"):
        rollout.release_config(str(release), "canary", {})


def test_unknown_environment_lists_the_ones_the_release_has(tmp_path):
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "canary.yaml").write_text("mysql: {server_id: 7}\n")
    with pytest.raises(rollout.DeployError, match="no config for environment 'prod'.*have: canary"):
        rollout.release_config(str(tmp_path), "prod", {})


def test_switch_replaces_the_link_so_readers_never_see_it_missing(tmp_path):
    a, b = tmp_path / "A", tmp_path / "B"
    a.mkdir()
    b.mkdir()
    link = str(tmp_path / "env" / "current")
    rollout.switch(link, str(a))
    seen_missing = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            if not os.path.exists(link):
                seen_missing.append(1)

    t = threading.Thread(target=reader)
    t.start()
    for i in range(300):
        rollout.switch(link, str(b if i % 2 == 0 else a))
    stop.set()
    t.join()
    assert os.path.realpath(link) == str(a)
    assert not seen_missing
    assert sorted(os.listdir(tmp_path / "env")) == ["current"]


def test_supervisor_program_gets_the_site_environment_escaped_and_private(tmp_path):
    svc = service.Supervisord(str(tmp_path))
    os.makedirs(os.path.join(svc.dir, "programs"))
    assert service._quote("K", 'pa"ss%w') == "'pa\"ss%%w'"
    assert service._quote("K", "it's") == '"it\'s"'
    with pytest.raises(service.ServiceError, match="K can't be passed.*mysql.password_file"):
        service._quote("K", "a'b\"c")
    with pytest.raises(service.ServiceError):
        service._quote("K", "secret'")
    service._write_private(os.path.join(svc.dir, "programs", "p.conf"), "x")
    assert os.stat(os.path.join(svc.dir, "programs", "p.conf")).st_mode & 0o777 == 0o600


def test_unknown_service_manager_is_refused_with_the_choices(tmp_path):
    with pytest.raises(ValueError, match="use 'systemd' or 'supervisord'"):
        service.service_for(str(tmp_path), "upstart")


def test_profiles_stay_with_the_environment_unless_the_site_says_otherwise(tmp_path):
    layout = rollout.Layout(str(tmp_path))
    (tmp_path / "etc").mkdir()
    assert rollout.service_environment(layout, "canary")["STREAMER__PROFILER__DIR"] == \
        str(tmp_path / "canary" / "profiles")
    write(tmp_path / "etc" / "main.env", "STREAMER__PROFILER__DIR=/srv/prof\n")
    assert rollout.service_environment(layout, "main")["STREAMER__PROFILER__DIR"] == "/srv/prof"


def test_the_service_gets_pypys_gc_settings_unless_the_site_sets_them(tmp_path):
    layout = rollout.Layout(str(tmp_path))
    (tmp_path / "etc").mkdir()
    canary = rollout.service_environment(layout, "canary")
    assert {k: canary.get(k) for k in gcpacing.GC_ENV} == gcpacing.GC_ENV
    write(tmp_path / "etc" / "main.env", "PYPY_GC_NURSERY=16MB\n")
    main = rollout.service_environment(layout, "main")
    assert main["PYPY_GC_NURSERY"] == "16MB"
    assert main["PYPY_GC_INCREMENT_STEP"] == gcpacing.GC_MARKING_STEP


@pytest.mark.parametrize("argv, said", [
    (["verify", "canary", "--max-slower-pct", "nan"], "--max-slower-pct: 'nan' is not a number "
                                                      "from 0 to 100"),
    (["verify", "canary", "--window", "0"], "--window: '0' is not a number above 0"),
    (["verify", "canary", "--max-lag-s", "-1"], "--max-lag-s: '-1' is not a number of at least 0"),
    (["deploy", "canary", "1.0", "--health-timeout", "-3"], "--health-timeout: '-3' is not a "
                                                            "number above 0"),
])
def test_a_verdict_limit_out_of_its_range_is_refused_before_anything_runs(argv, said, capsys):
    # deploy.sh verify took --max-slower-pct nan, and no canary could fail its verdict.
    with pytest.raises(SystemExit) as stopped:
        rollout.main(argv)
    assert stopped.value.code == 2 and said in capsys.readouterr().err
