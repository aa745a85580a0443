"""Tables renamed onto other names, read from RENAME TABLE and ALTER TABLE ... RENAME."""
import pytest

from streamer.source.renames import online_swap, renames


@pytest.mark.parametrize("query, expected", [
    ("RENAME TABLE t TO t_old, t_new TO t",
     [(("cur", "t"), ("cur", "t_old")), (("cur", "t_new"), ("cur", "t"))]),
    ("rename tables `s`.`a b` to s2.c /* app */", [(("s", "a b"), ("s2", "c"))]),
    # MariaDB's IF EXISTS and lock waits, and its per-statement settings.
    ("RENAME TABLE IF EXISTS a WAIT 5 TO b, c NOWAIT TO d",
     [(("cur", "a"), ("cur", "b")), (("cur", "c"), ("cur", "d"))]),
    ("SET STATEMENT lock_wait_timeout=2 FOR RENAME TABLE a TO b", [(("cur", "a"), ("cur", "b"))]),
    ("ALTER TABLE a RENAME TO b", [(("cur", "a"), ("cur", "b"))]),
    ("ALTER TABLE s.a RENAME b", [(("s", "a"), ("s", "b"))]),
    ("ALTER TABLE a ADD COLUMN x INT, RENAME AS other.b", [(("cur", "a"), ("other", "b"))]),
    # Renames of a column or an index, and a word in a string or a comment: no table's.
    ("ALTER TABLE a RENAME COLUMN x TO y", []),
    ("ALTER TABLE a RENAME INDEX i TO j, RENAME KEY k TO l", []),
    ("ALTER TABLE a COMMENT 'rename to b' /* RENAME TO c */", []),
    ("INSERT INTO log VALUES ('RENAME TABLE a TO b')", []),
    ("RENAME USER u TO v", []),
])
def test_the_tables_a_statement_renames_are_read_old_and_new(query, expected):
    assert renames(query, "cur") == expected


def test_an_online_schema_change_tools_swap_is_told_by_its_names():
    assert online_swap(("s", "_t_gho"), ("s", "t"))  # gh-ost's copy
    assert online_swap(("s", "t"), ("s", "_t_del"))  # and the table it sets aside
    assert online_swap(("s", "_t_new"), ("s", "t"))  # pt-online-schema-change's
    assert online_swap(("s", "t"), ("s", "_t_old"))
    assert online_swap(("s", "__t.x_new"), ("s", "t.x"))
    assert not online_swap(("s", "t_new"), ("s", "t"))
    assert not online_swap(("other", "_t_gho"), ("s", "t"))
    assert not online_swap(("s", "_u_gho"), ("s", "t"))
    assert not online_swap(("s", "t"), ("s", "_u_del"))
