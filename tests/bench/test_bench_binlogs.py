"""The bench's room check before a run and its report of the binlog it purged after one."""
import pymysql

from bench import binlogs

GB = binlogs.GB


def test_a_disk_with_less_free_than_the_run_needs_is_refused_with_the_fix():
    msg = binlogs.room_error("/var/lib/mysql-binlog", int(0.9 * GB), 10 * GB)
    assert "only 0.9 GB free" in msg and "/var/lib/mysql-binlog" in msg and "~10 GB" in msg
    assert "PURGE BINARY LOGS" in msg and "--quick" in msg


def test_room_enough_or_nothing_to_read_is_no_refusal():
    assert binlogs.room_error("/b", 10 * GB, 10 * GB) is None
    assert binlogs.room_error(None, None, 10 * GB) is None  # a server whose binlog isn't here
    assert binlogs.room_error("/b", None, 10 * GB) is None


def test_a_quick_run_needs_less_room_than_a_full_one():
    assert 0 < binlogs.need_bytes(True) < binlogs.need_bytes(False)


def test_free_bytes_reads_the_filesystem_and_none_for_a_missing_path(tmp_path):
    assert binlogs.free_bytes(str(tmp_path)) > 0
    assert binlogs.free_bytes(str(tmp_path / "missing")) is None


def test_the_purge_report_names_the_files_the_bytes_and_how_to_keep_them():
    done = binlogs.Purged(files=7, bytes=3 * GB, kept="mysql-bin.000042").describe()
    assert "purged 7 binlog files (3.00 GB)" in done and "before mysql-bin.000042" in done
    assert "the local streamer's checkpoint needs" in done
    assert "--keep-binlogs" in done


def test_a_purge_that_left_files_says_which_and_how_to_finish_it():
    left = binlogs.Purged(files=2, bytes=GB, kept="mysql-bin.000009",
                          error="mysql-bin.000005 .. mysql-bin.000008 stay").describe()
    assert "purged 2 binlog files" in left and "not all of them" in left
    assert "mysql-bin.000005 .. mysql-bin.000008 stay" in left
    assert "PURGE BINARY LOGS TO 'mysql-bin.000009'" in left


class FakeBinlogServer:
    """SHOW BINARY LOGS, SHOW MASTER STATUS, FLUSH and PURGE BINARY LOGS over a list of files."""

    def __init__(self, n):
        self.files = [f"mysql-bin.{i:06d}" for i in range(1, n + 1)]

    def cursor(self):
        server = self

        class Cursor:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                pass

            def execute(self, sql, args=None):
                if sql == "FLUSH BINARY LOGS":
                    last = int(server.files[-1].rsplit(".", 1)[1])
                    server.files.append(f"mysql-bin.{last + 1:06d}")
                elif sql.startswith("PURGE BINARY LOGS TO"):
                    if args[0] not in server.files:  # as the server refuses it
                        raise pymysql.err.InternalError(1373, "Target log not found in binlog index")
                    server.files = [f for f in server.files if f >= args[0]]
                self.sql = sql

            def fetchall(self):
                return [(f, 1000) for f in server.files]

            def fetchone(self):
                return (server.files[-1], 4)

        return Cursor()


def test_a_purge_keeps_the_file_the_local_checkpoint_needs_and_every_later_one():
    server = FakeBinlogServer(5)
    done = binlogs.purge(server, keep_from="mysql-bin.000003", pause_s=0)
    assert server.files == ["mysql-bin.000003", "mysql-bin.000004", "mysql-bin.000005",
                            "mysql-bin.000006"]
    assert (done.files, done.kept, done.error) == (2, "mysql-bin.000003", None)
    server = FakeBinlogServer(5)
    binlogs.purge(server, pause_s=0)  # no checkpoint: only the fresh file stays
    assert server.files == ["mysql-bin.000006"]


def test_a_file_the_checkpoint_needs_that_is_already_gone_stops_no_purge():
    # Its checkpoint can't resume whatever stays; the purge goes on as without one.
    server = FakeBinlogServer(5)
    server.files = server.files[2:]  # 000001 and 000002 purged before
    done = binlogs.purge(server, keep_from="mysql-bin.000001", pause_s=0)
    assert server.files == ["mysql-bin.000006"]
    assert (done.files, done.kept, done.error) == (3, "mysql-bin.000006", None)


def test_the_oldest_of_the_files_checkpoints_need():
    assert binlogs.oldest("mysql-bin.000010", None, "mysql-bin.000009") == "mysql-bin.000009"
    assert binlogs.oldest("mysql-bin.000100", "mysql-bin.000099") == "mysql-bin.000099"
    assert binlogs.oldest(None, None) is None
