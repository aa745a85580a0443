"""An explicit start (--start-file/--start-pos, --start-gtid, start.* in the config) is checked
before anything connects: a typo is one clear error naming the form, never a traceback, and never
a position committed as the stream's checkpoint (source.server.check_transaction_start checks
the rest against the server)."""
import re

import pytest

from streamer import cli, config
from streamer.position import gtid_set_problem

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@pytest.mark.parametrize("text", ["", "0-1-5", "0-1-5, 1-2-3", f"{U1.upper()}:1-5",
                                  f"{U1}:1-5:tag_1:1-3", f"{U1}:1-5,\n{U1[:-1]}3:7"])
def test_gtid_sets_of_either_flavour_are_taken(text):
    assert gtid_set_problem(text) is None


@pytest.mark.parametrize("text,problem", [
    ("zzz", "'zzz' is neither a MariaDB GTID nor a MySQL uuid:interval"),
    ("0-1-", "'0-1-' is neither"),
    ("x:1", "'x' in 'x:1' is not a server uuid"),
    (f"{U1}:0", "'0' in .* is not an interval of transaction numbers"),
    (f"{U1}:5-3", "'5-3' in .* is not an interval"),
    (f"{U1}:tag", "names no transactions"),
    (f"0-1-5,{U1}:1", "it mixes MariaDB's GTIDs and MySQL's"),
])
def test_anything_else_is_said_what_is_wrong(text, problem):
    assert re.search(problem, gtid_set_problem(text))


def _start(*argv):
    args = cli.build_parser().parse_args(["run", "-c", "x.yaml", *argv])
    return cli._explicit_start(args)


def test_the_command_lines_start_is_checked_as_the_configs_is():
    assert _start() is None
    pos = _start("--start-file", "mysql-bin.000003", "--start-pos", "4")
    assert (pos.file, pos.pos) == ("mysql-bin.000003", 4)
    assert _start("--start-gtid", "0-1-5") is None  # the set goes to the supervisor as it is
    with pytest.raises(config.ConfigError, match="--start-pos 0 is not a binlog offset: a "
                                                 "file's first event is at 4"):
        _start("--start-file", "mysql-bin.000003", "--start-pos", "0")
    with pytest.raises(config.ConfigError, match="--start-file and --start-pos go together"):
        _start("--start-pos", "4")
    with pytest.raises(config.ConfigError,
                       match="--start-gtid 'zzz' is not a GTID set: 'zzz' is neither .* Write "
                             "MariaDB's domain-server-seq per domain"):
        _start("--start-gtid", "zzz")


def test_a_config_start_gtid_that_is_no_gtid_set_is_refused_naming_the_forms(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("mysql: {server_id: 7}\nstart: {gtid: '0-1-'}\n")
    with pytest.raises(config.ConfigError, match="config key 'start.gtid' has bad value '0-1-'; "
                                                 "allowed: MariaDB's domain-server-seq"):
        config.load(str(path), environ={})
    path.write_text(f"mysql: {{server_id: 7}}\nstart: {{gtid: '{U1}:1-9'}}\n")
    assert config.load(str(path), environ={}).start.gtid == f"{U1}:1-9"

