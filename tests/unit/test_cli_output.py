"""What a command's output says: when the reader of its output goes away first, and what
`streamer check` names a line by."""
import subprocess
import sys


def test_a_reader_that_closes_the_pipe_first_ends_the_command_without_a_traceback():
    # `streamer tail TOPIC | head` printed a BrokenPipeError traceback.
    code = ("import sys\nimport streamer.cli as c\n"
            "def flood(args):\n    for _ in range(10 ** 6):\n        print('x' * 100)\n"
            "    return 0\n"
            "c.cmd_profile = flood\nsys.exit(c.main(['profile', 'unused']))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"x" * 100 + b"\n"
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(60) == 141, err
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err


def test_check_names_a_login_it_could_not_try_as_the_login(tmp_path, monkeypatch):
    # A TLS file that doesn't load was shown as "✗ MySQL password: config key 'mysql.tls.ca'...".
    from streamer import cli, config

    monkeypatch.setattr(cli, "_kafka_check", lambda cfg: ("Kafka", True, "not asked here"))
    junk = tmp_path / "ca.pem"
    junk.write_text("not a certificate\n")
    pw = tmp_path / "pw"
    pw.write_text("x\n")
    for mysql, said in (({"password_file": str(tmp_path / "none")}, "mysql.password_file"),
                        ({"password_file": str(pw), "tls": {"mode": "verify_ca",
                                                             "ca": str(junk)}}, "mysql.tls.ca")):
        cfg = config.build({"mysql": dict(mysql, server_id=7, host="127.0.0.1", port=1)})
        name, ok, text = cli._checks(cfg)[0]
        assert (name, ok) == ("MySQL login streamer@127.0.0.1:1", False) and said in text



def test_a_count_or_a_limit_out_of_its_range_is_refused_naming_the_range(capsys):
    # `verify --max-slower-pct nan` (or 150) could never fail a canary, `--window -5` watched
    # nothing, `tail --max 0` and `audit --timeout 0` were taken as given.
    import pytest

    from streamer import cli

    refused = [
        (["verify", "-c", "x", "--window", "-5"], "--window: '-5' is not a number above 0"),
        (["verify", "-c", "x", "--window", "inf"], "--window: 'inf' is not a number above 0"),
        (["verify", "-c", "x", "--max-slower-pct", "nan"],
         "--max-slower-pct: 'nan' is not a number from 0 to 100"),
        (["verify", "-c", "x", "--max-slower-pct", "150"], "from 0 to 100"),
        (["verify", "-c", "x", "--max-lag-s", "-1"], "--max-lag-s: '-1' is not a number of at "
                                                    "least 0"),
        (["tail", "t", "--max", "0"], "--max: '0' is not a whole number of at least 1"),
        (["tail", "t", "--max", "2.5"], "--max: '2.5' is not a whole number"),
        (["tail", "t", "--idle-exit", "0"], "--idle-exit: '0' is not a number above 0"),
        (["profile", "p", "--top", "-1"], "--top: '-1' is not a whole number of at least 1"),
        (["audit", "-c", "x", "--tables", "a.b", "--timeout", "0"], "--timeout: '0' is not a "
                                                                    "number above 0"),
    ]
    for argv, said in refused:
        with pytest.raises(SystemExit) as stopped:
            cli.build_parser().parse_args(argv)
        assert stopped.value.code == 2
        assert said in capsys.readouterr().err, argv
    args = cli.build_parser().parse_args(["verify", "-c", "x", "--window", "0.5",
                                          "--max-lag-s", "0", "--max-slower-pct", "100"])
    assert (args.window, args.max_lag_s, args.max_slower_pct) == (0.5, 0.0, 100.0)
    assert cli.build_parser().parse_args(["tail", "t", "--max", "3"]).max == 3
