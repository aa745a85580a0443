"""Transaction metadata against the real servers: BEGIN and END records frame each source
transaction, a multi-statement one and a 200k-row one spread over many batches."""
import json

from tests import support


def test_begin_and_end_frame_a_multi_statement_and_a_200k_row_transaction(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
                "CREATE TABLE b (id INT PRIMARY KEY, v INT)", "INSERT INTO b VALUES (1, 0)",
                "CREATE TABLE big (id INT PRIMARY KEY)")
    start = support.master_pos(conn)
    support.sql(conn, "BEGIN", "INSERT INTO a VALUES (1, 1), (2, 2), (3, 3)",
                "UPDATE b SET v = 1 WHERE id = 1", "DELETE FROM a WHERE id = 2", "COMMIT",
                "INSERT INTO big SELECT seq FROM seq_1_to_200000")
    ns = support.unique("tx")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               topics={"transactions": True}, batch={"max_messages": 20000})
    topics = {t: f"{ns}.{name}.{t}" for t in ("a", "b", "big")}
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        rows = support.consume(list(topics.values()), expect=6 + 200000, timeout=240)
        records = support.consume([f"{ns}.__transactions"], expect=4, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert len(rows) == 6 + 200000
    frames = [m["value"] for m in records]
    assert [f["status"] for f in frames] == ["BEGIN", "END", "BEGIN", "END"]
    first, big = frames[1], frames[3]
    # Three inserts and a delete with its tombstone in a, an update in b.
    assert first["event_count"] == 6 and first["data_collections"] == [
        {"topic": topics["a"], "event_count": 5}, {"topic": topics["b"], "event_count": 1}]
    assert big["event_count"] == 200000 and big["data_collections"] == [
        {"topic": topics["big"], "event_count": 200000}]
    assert frames[0]["id"] == first["id"] != frames[2]["id"] == big["id"]
    assert all(f["gtid"] for f in frames)
    # The ids are the rows' source.txid.
    dec = support.decoder(ns)
    sample = dec.decode(next(m["raw_value"] for m in rows if m["topic"] == topics["big"]))
    assert sample["source"]["txid"] == big["id"]
    # The big one was spread over batches: checkpoints inside it carried its BEGIN and counts.
    inside = [json.loads(m["raw_value"]) for m in support.consume([f"{ns}.__positions"])]
    inside = [c for c in inside if c.get("transaction", {}).get("id") == big["id"]]
    assert len(inside) >= 5 and all(c["rows"] > 0 for c in inside)
    counts = sorted(c["transaction"]["counts"][topics["big"]] for c in inside)
    # (The last may hold all 200000: a batch cut right after the last rows, its END in the next.)
    assert counts[0] < 200000 and counts[-1] <= 200000
