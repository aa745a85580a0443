"""Transaction metadata (topics.transactions): BEGIN and END per source transaction, without a server."""
import collections
import json

from streamer.position import Position
from tests.unit.engine.test_engine import TX2, replay

TOPIC = "test.__transactions"


def _records(publisher):
    """(batch index, record) of every committed transaction record, in order."""
    dec = publisher.decoder()
    return [(i, dec.decode(m[2])) for i, (messages, _) in enumerate(publisher.log)
            for m in messages if m[0] == TOPIC]


def _txids(publisher):
    """The source.txid of each committed row-change message, in order (tombstones: None)."""
    dec = publisher.decoder()
    out = []
    for _, _, value in publisher.messages():
        env = dec.decode(value)
        out.append(None if env is None else env["source"]["txid"])
    return out


def test_each_transaction_that_published_is_framed_by_a_begin_and_an_end(make):
    streamer, publisher = make(topics={"transactions": True})
    replay(streamer, publisher)
    records = [r for _, r in _records(publisher)]
    assert [r["status"] for r in records] == ["BEGIN", "END"] * 5
    ends = [r for r in records if r["status"] == "END"]
    # tx 1: three inserts; tx 2: seven changes of which one is unpublished, one delete and a key
    # change (delete, tombstone, create): nine messages; then INSERT, TRUNCATE, INSERT.
    assert [r["event_count"] for r in ends] == [3, 9, 1, 1, 1]
    assert all(r["data_collections"] == [{"topic": "test.app.t", "event_count": r["event_count"]}]
               for r in ends)
    # A transaction's id is its rows' source.txid; BEGIN and END name the same one.
    begins = [r for r in records if r["status"] == "BEGIN"]
    assert [b["id"] for b in begins] == [e["id"] for e in ends]
    seen = [t for t in _txids(publisher) if t is not None]
    assert [b["id"] for b in begins] == list(dict.fromkeys(seen))
    assert all(r["gtid"] for r in records)  # MariaDB logs a GTID per transaction
    assert all(e["ts_ms"] >= b["ts_ms"] for b, e in zip(begins, ends))
    # The schema went out before the first record, so a consumer decodes them.
    assert [r["kind"] for r in publisher.read_schema_records() if r["topic"] == TOPIC] == \
        ["transaction"]
    # ... and a start after it reads the table versions' lineage past it.
    again, resumed = make(topics={"transactions": True})
    resumed.log = publisher.log
    replay(again, resumed, start=publisher.committed)


def test_no_records_without_the_setting(make):
    streamer, publisher = make()
    replay(streamer, publisher)
    assert _records(publisher) == []
    assert TOPIC not in publisher.topics


def _stopped_inside_transaction_2(streamer, publisher):
    """Replay the recording until a commit inside transaction 2, where the stream stops as a
    SIGTERM would; the checkpoint of that commit."""
    def stop_inside_transaction_2(position):
        if position.pos == TX2 and position.rows:
            streamer.request_stop()

    publisher.on_commit = stop_inside_transaction_2
    replay(streamer, publisher)
    checkpoint = publisher.committed
    assert checkpoint.pos == TX2 and checkpoint.rows
    return checkpoint


def test_a_transaction_spread_over_batches_and_a_restart_inside_it_is_framed_once(make):
    streamer, publisher = make(batch={"max_messages": 2}, topics={"transactions": True})
    checkpoint = _stopped_inside_transaction_2(streamer, publisher)
    # The open transaction's BEGIN and counts so far are in the checkpoint.
    assert checkpoint.transaction["id"].endswith(f":{TX2}")
    assert sum(checkpoint.transaction["counts"].values()) > 0
    first = _records(publisher)
    again, resumed = make(batch={"max_messages": 2}, topics={"transactions": True})
    replay(again, resumed, start=Position.from_json(checkpoint.to_json()))
    records = [r for _, r in first] + [r for _, r in _records(resumed)]
    tx2 = [r for r in records if r["id"] == checkpoint.transaction["id"]]
    assert [r["status"] for r in tx2] == ["BEGIN", "END"]
    assert tx2[1]["event_count"] == 9
    # Over both runs, every transaction is framed once.
    assert collections.Counter(r["status"] for r in records) == {"BEGIN": 5, "END": 5}
    # The BEGIN went in the batch with the transaction's first rows, the END in a later one.
    batches = {r["status"]: i for i, r in first if r["id"] == tx2[0]["id"]}
    assert set(batches) == {"BEGIN"}


def test_the_open_transaction_rides_in_the_checkpoint_json():
    progress = {"id": "f:4", "gtid": "0-1-5", "ts_ms": 1000, "counts": {"ns.db.t": 3}}
    p = Position("f", 4, rows=3, transaction=progress)
    assert Position.from_json(p.to_json()).transaction == progress
    assert "transaction" not in json.loads(Position("f", 4).to_json())


def test_in_a_transaction_cut_into_batches_the_end_goes_with_its_last_rows(make):
    streamer, publisher = make(batch={"max_messages": 4}, topics={"transactions": True})
    replay(streamer, publisher)
    records = _records(publisher)
    tx2 = [(i, r) for i, r in records if r["event_count"] == 9 or
           (r["status"] == "BEGIN" and r["id"].endswith(f":{TX2}"))]
    (begin_batch, begin), (end_batch, end) = tx2
    assert begin["status"] == "BEGIN" and end["status"] == "END" and begin_batch < end_batch
    dec = publisher.decoder()
    rows_by_batch = collections.Counter(
        i for i, (messages, _) in enumerate(publisher.log) for m in messages
        if m[0] == "test.app.t" and m[2] is not None and
        dec.decode(m[2])["source"]["txid"] == begin["id"])
    assert min(rows_by_batch) == begin_batch and max(rows_by_batch) == end_batch


def _debezium(make, **kwargs):
    """format debezium (JSON without schemas) with transaction metadata on."""
    return make(topics={"transactions": True},
                sections={"format": "debezium", "debezium": {"schemas_enable": False}}, **kwargs)


def _blocks_and_ends(publisher):
    """The transaction block of each change (in order) and each END record, by transaction."""
    blocks, ends = collections.defaultdict(list), {}
    for topic, _, value in publisher.messages(all_topics=True):
        if topic == "test.app.t" and value is not None:
            block = json.loads(value)["transaction"]
            blocks[block["id"]].append((block["total_order"], block["data_collection_order"]))
        elif topic == "test.transaction" and json.loads(value)["status"] == "END":
            ends[json.loads(value)["id"]] = json.loads(value)
    return blocks, ends


def test_debezium_changes_carry_their_order_in_the_transaction_and_its_end_counts_them(make):
    streamer, publisher = _debezium(make)
    replay(streamer, publisher)
    blocks, ends = _blocks_and_ends(publisher)
    # tx 2: six published row changes, its key change a delete and a create; tombstones are
    # no change events, so 7 (the streamer's own END counts its 9 messages).
    assert [len(b) for b in blocks.values()] == [3, 7, 1, 1, 1]
    for txid, orders in blocks.items():
        n = len(orders)
        assert orders == [(i, i) for i in range(1, n + 1)]  # one table: both orders alike
        assert ends[txid]["event_count"] == n
        assert ends[txid]["data_collections"] == [{"data_collection": "app.t", "event_count": n}]
    # The id is the streamer's transaction id: the binlog file and offset of its start.
    assert all(txid.startswith("mysql-bin.000002:") and int(txid.split(":")[1]) > 0
               for txid in blocks)


def test_debezium_orders_go_on_after_a_restart_inside_the_transaction(make):
    streamer, publisher = _debezium(make, batch={"max_messages": 2})
    checkpoint = _stopped_inside_transaction_2(streamer, publisher)
    saved = checkpoint.transaction["records"]
    assert 0 < saved["total"] == saved["by_collection"]["app.t"] < 7
    again, resumed = _debezium(make, batch={"max_messages": 2})
    replay(again, resumed, start=Position.from_json(checkpoint.to_json()))
    first, _ = _blocks_and_ends(publisher)
    then, ends = _blocks_and_ends(resumed)
    tx2 = checkpoint.transaction["id"]
    assert first[tx2] + then[tx2] == [(i, i) for i in range(1, 8)]  # none repeated or lost
    assert ends[tx2]["event_count"] == 7


def test_debezium_heartbeats_go_to_their_topic_once_per_interval(make):
    def heartbeats(interval_ms):
        streamer, publisher = make(sections={"format": "debezium", "debezium": {
            "schemas_enable": False, "heartbeat_interval_ms": interval_ms}})
        replay(streamer, publisher)
        return [(k, v) for t, k, v in publisher.messages(all_topics=True)
                if t == "__debezium-heartbeat.test"], publisher
    assert heartbeats(0)[0] == []
    every, publisher = heartbeats(1)  # the test clock moves 1 ms per reading: one per chance
    rare, _ = heartbeats(10 ** 9)     # only the first
    assert len(rare) == 1 and len(every) > 5
    assert all(json.loads(k) == {"serverName": "test"} for k, _ in every)
    stamps = [json.loads(v)["ts_ms"] for _, v in every]
    assert stamps == sorted(stamps) and all(isinstance(s, int) and s > 0 for s in stamps)
    assert "__debezium-heartbeat.test" in publisher.topics
