import json

import pytest

from streamer import config
from streamer.settings import Key


def write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return str(p)


BASE = "mysql: {server_id: 7}\n"


def test_defaults_fill_everything_not_given(tmp_path):
    cfg = config.load(write(tmp_path, BASE), environ={})
    assert cfg["batch"]["max_messages"] == 20000
    assert cfg["kafka"]["bootstrap.servers"] == "127.0.0.1:9092"
    assert cfg["source"]["name"] == "127.0.0.1-3306"


def test_missing_server_id_is_refused_with_the_key_named(tmp_path):
    with pytest.raises(config.ConfigError, match="mysql.server_id.*never random"):
        config.load(write(tmp_path, "namespace: x\n"), environ={})


def test_unknown_key_names_the_allowed_ones(tmp_path):
    with pytest.raises(config.ConfigError, match="unknown config key 'mysql.hots'.*host"):
        config.load(write(tmp_path, "mysql: {hots: a, server_id: 1}\n"), environ={})


def test_a_renamed_key_names_its_new_name_and_the_log_section_is_checked(tmp_path):
    with pytest.raises(config.ConfigError, match="'log_level' is now 'log.level'"):
        config.load(write(tmp_path, BASE + "log_level: DEBUG\n"), environ={})
    cfg = config.load(write(tmp_path, BASE + "log: {level: debug, format: json}\n"), environ={})
    assert cfg["log"] == {"level": "DEBUG", "format": "json"}
    with pytest.raises(config.ConfigError, match="log.format"):
        config.load(write(tmp_path, BASE + "log: {format: xml}\n"), environ={})


def test_bad_value_names_key_value_and_what_is_allowed(tmp_path):
    with pytest.raises(config.ConfigError) as err:
        config.load(write(tmp_path, BASE + "batch: {max_messages: -3}\n"), environ={})
    assert "batch.max_messages" in str(err.value) and "-3" in str(err.value)


def test_min_linger_and_gather_may_be_zero_but_not_negative(tmp_path):
    cfg = config.load(write(tmp_path, BASE), environ={})
    assert cfg["batch"]["min_linger_ms"] == 0 and cfg["batch"]["gather_ms"] == 0.8
    for key in ("min_linger_ms", "gather_ms"):
        with pytest.raises(config.ConfigError, match=rf"batch.{key}.*-1.*>= 0"):
            config.load(write(tmp_path, BASE + f"batch: {{{key}: -1}}\n"), environ={})
        assert config.load(write(tmp_path, BASE + f"batch: {{{key}: 0}}\n"),
                           environ={})["batch"][key] == 0


def test_environment_overrides_nested_and_kafka_keys(tmp_path):
    env = {"STREAMER__MYSQL__PORT": "3310", "STREAMER__KAFKA__LINGER_MS": "20",
           "STREAMER__NAMESPACE": "canary"}
    cfg = config.load(write(tmp_path, BASE), environ=env)
    assert cfg["mysql"]["port"] == 3310
    assert cfg["kafka"]["linger.ms"] == 20
    assert cfg["namespace"] == "canary"


def test_streamer_owned_kafka_keys_are_refused(tmp_path):
    with pytest.raises(config.ConfigError, match="transactional.id"):
        config.load(write(tmp_path, BASE + "kafka: {transactional.id: x}\n"), environ={})


def test_table_patterns_must_be_db_dot_table(tmp_path):
    with pytest.raises(config.ConfigError, match="tables.include"):
        config.load(write(tmp_path, BASE + "tables: {include: [orders]}\n"), environ={})


def test_password_from_file_relative_to_config_and_never_missing_silently(tmp_path):
    (tmp_path / "pw").write_text("s3cret\n")
    cfg = config.load(write(tmp_path, BASE.replace("}", ", password_file: pw}")), environ={})
    assert config.mysql_password(cfg, environ={}) == "s3cret"
    cfg = config.load(write(tmp_path, BASE), environ={})
    with pytest.raises(config.ConfigError, match="STREAMER_MYSQL_PASSWORD"):
        config.mysql_password(cfg, environ={})
    assert config.mysql_password(cfg, environ={"STREAMER_MYSQL_PASSWORD": "x"}) == "x"


@pytest.mark.parametrize("value", [5, True, [1], {"a": 1}, -1, 1.5, "x", None])
def test_any_value_of_any_key_is_taken_or_refused_by_the_keys_name(tmp_path, value):
    # A path given a number (password_file: 5) was a TypeError with a traceback: the paths were
    # made relative to the config's folder before any key was checked.
    for dotted, entry in config.KEYS.walk():
        if not isinstance(entry, Key):
            continue
        doc = {"mysql": {"server_id": 7}}
        *parents, last = dotted.split(".")
        node = doc
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
        try:
            config.load(write(tmp_path, json.dumps(doc)), environ={})
        except config.ConfigError as exc:
            # (a pair that goes together names the other as '.key')
            assert dotted in str(exc) or f"'.{last}'" in str(exc), (dotted, str(exc))


def test_start_file_and_pos_go_together(tmp_path):
    with pytest.raises(config.ConfigError, match="start.file"):
        config.load(write(tmp_path, BASE + "start: {file: mysql-bin.000001}\n"), environ={})


def test_more_than_one_produce_request_in_flight_is_refused_naming_why(tmp_path):
    for key in ("max.in.flight.requests.per.connection", "max.in.flight"):
        with pytest.raises(config.ConfigError, match=rf"'kafka\.{key}' is 5.*must stay 1.*order"):
            config.load(write(tmp_path, BASE + f"kafka: {{'{key}': 5}}\n"), environ={})
        assert config.load(write(tmp_path, BASE + f"kafka: {{'{key}': 1}}\n"), environ={})
    with pytest.raises(config.ConfigError, match="must stay 1"):
        config.load(write(tmp_path, BASE), environ={"STREAMER__KAFKA__MAX_IN_FLIGHT": "3"})


def test_kerberos_which_the_shipped_librdkafka_lacks_is_refused_naming_what_works(tmp_path):
    # tests/unit/kafka/test_rdkafka.py checks that the project's librdkafka has no sasl_gssapi.
    for key in config.SASL_MECHANISM_KEYS:
        with pytest.raises(config.ConfigError, match=rf"'kafka\.{key}' is GSSAPI.*SCRAM-SHA-512"):
            config.load(write(tmp_path, BASE + f"kafka: {{'{key}': gssapi}}\n"), environ={})
        assert config.load(write(tmp_path, BASE + f"kafka: {{'{key}': SCRAM-SHA-512}}\n"), environ={})


def test_heartbeat_enabled_takes_true_false_or_auto(tmp_path):
    for value in ("true", "false", "auto"):
        config.load(write(tmp_path, BASE + f"heartbeat: {{enabled: {value}}}\n"), environ={})
    with pytest.raises(config.ConfigError, match="heartbeat.enabled.*true, false or auto"):
        config.load(write(tmp_path, BASE + "heartbeat: {enabled: sometimes}\n"), environ={})


def test_kafka_settings_and_secrets_from_the_environment_are_taken_as_the_strings_they_are(tmp_path):
    env = {"STREAMER__KAFKA__SASL_PASSWORD": "0123", "STREAMER__KAFKA__SASL_USERNAME": "2024-01-02",
           "STREAMER__KAFKA__ENABLE_SSL_CERTIFICATE_VERIFICATION": "false",
           "STREAMER__SIGNALFX__TOKEN_ENV": "yes"}
    cfg = config.load(write(tmp_path, BASE), environ=env)
    assert cfg["kafka"]["sasl.password"] == "0123" and cfg["kafka"]["sasl.username"] == "2024-01-02"
    assert cfg["kafka"]["enable.ssl.certificate.verification"] == "false"  # as librdkafka takes it
    assert cfg["signalfx"]["token_env"] == "yes"


def test_an_environment_value_that_is_not_valid_yaml_names_the_variable_never_the_value(tmp_path):
    secret = "s3cr3t: {oops"
    with pytest.raises(config.ConfigError) as err:
        config.load(write(tmp_path, BASE), environ={"STREAMER__MYSQL__PORT": secret})
    assert "STREAMER__MYSQL__PORT" in str(err.value) and secret not in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    # A password of any shape is a string: nothing to parse, nothing to fail.
    cfg = config.load(write(tmp_path, BASE), environ={"STREAMER__KAFKA__SASL_PASSWORD": secret})
    assert cfg["kafka"]["sasl.password"] == secret


@pytest.mark.parametrize("setting,named", [
    ("heartbeat_interval_ms: -5", "debezium.heartbeat_interval_ms"),
    ("heartbeat_topic_prefix: 'bad prefix'", "debezium.heartbeat_topic_prefix"),
])
def test_debeziums_heartbeat_settings_are_checked(tmp_path, setting, named):
    path = write(tmp_path, "mysql: {server_id: 5}\nformat: debezium\ndebezium: {%s}\n" % setting)
    with pytest.raises(config.ConfigError, match=named):
        config.load(path, environ={})


def test_a_secret_read_again_keeps_the_last_one_when_its_file_cant_be_read(tmp_path, caplog):
    path = tmp_path / "secret"
    path.write_text("two\n")
    read = lambda: config.read_secret_file("x.password_file", str(path))  # noqa: E731
    assert config.read_again(read, "one", "connecting with the password") == "two"
    assert caplog.text == ""
    path.unlink()
    assert config.read_again(read, "two", "connecting with the password") == "two"
    assert f"config key 'x.password_file': cannot read {path}: No such file or directory; " \
           "connecting with the password read before" in caplog.text


@pytest.mark.parametrize("env", [
    {"STREAMER__MYSQL": "5", "STREAMER__MYSQL__PORT": "1"},
    {"STREAMER__MYSQL__PORT": "3", "STREAMER__MYSQL__PORT__X": "1"},
    {"STREAMER__MYSQL__PORT__X": "1", "STREAMER__MYSQL__PORT": "3"},
    {"STREAMER__MYSQL__PORT": "3", "STREAMER__mysql__port": "4"},
    {"STREAMER__MYSQL__PORT": "3", "STREAMER__MYSQL____PORT": "4"},
])
def test_two_overrides_of_one_key_are_refused_naming_both(tmp_path, env):
    # In either order: one was a TypeError, and the other dropped one of them unsaid.
    first, second = env
    for order in (env, dict(reversed(list(env.items())))):
        with pytest.raises(config.ConfigError, match="both set config key") as err:
            config.load(write(tmp_path, BASE), environ=order)
        assert first in str(err.value) and second in str(err.value)


@pytest.mark.parametrize("name", ["STREAMER__", "STREAMER____"])
def test_an_override_naming_no_key_is_refused(tmp_path, name):
    with pytest.raises(config.ConfigError, match=f"{name} names no config key.*STREAMER__SECTION__KEY"):
        config.load(write(tmp_path, BASE), environ={name: "1"})


def test_a_namespace_too_long_for_its_own_topics_is_refused_by_name(tmp_path):
    # It was taken, and the start failed when Kafka refused to create {namespace}.__transactions
    # (249 characters at most), as a Kafka error.
    longest = 249 - len(".__transactions")
    assert config.load(write(tmp_path, BASE + f"namespace: {'n' * longest}\n"), environ={})
    with pytest.raises(config.ConfigError, match=rf"'namespace' .*{longest + 1} characters.*"
                                                 r"__transactions.* 250.*249 at most"):
        config.load(write(tmp_path, BASE + f"namespace: {'n' * (longest + 1)}\n"), environ={})
    # Debezium's heartbeat topic is {heartbeat_topic_prefix}.{namespace}.
    prefix = "p" * 200
    with pytest.raises(config.ConfigError, match=r"'debezium.heartbeat_topic_prefix'.*p\.nnn"):
        config.load(write(tmp_path, BASE + f"namespace: {'n' * 60}\nformat: debezium\n"
                                           f"debezium: {{heartbeat_topic_prefix: {prefix}}}\n"),
                    environ={})


@pytest.mark.parametrize("text, line", [
    ("mysql: {server_id: 7, port: 3310}\nnamespace: a\nmysql: {server_id: 8}\n", 3),
    ("mysql:\n  server_id: 7\n  port: 3310\n  port: 3311\n", 4),
    ("mysql: {server_id: 7}\nkafka:\n  linger.ms: 5\n  linger.ms: 50\n", 4),
])
def test_a_key_given_twice_is_refused_naming_it_and_its_line(tmp_path, text, line):
    # YAML forbids it, and PyYAML took the last silently: a whole first `mysql:` section, with
    # its port, was dropped unsaid.
    with pytest.raises(config.ConfigError, match=rf"is not valid YAML: key '\w+(.ms)?' is given "
                                                 rf"twice in one mapping, at lines \d and {line}"):
        config.load(write(tmp_path, text), environ={})


def test_a_merge_key_may_still_be_overridden(tmp_path):
    text = ("x-common: &common {server_id: 7, port: 3310}\nmysql:\n  <<: *common\n  port: 3311\n")
    with pytest.raises(config.ConfigError, match="unknown config key 'x-common'"):
        config.load(write(tmp_path, text), environ={})  # the key is refused, not the merge
    cfg = config._read_file(write(tmp_path, text))
    assert cfg["mysql"] == {"server_id": 7, "port": 3311}


@pytest.mark.parametrize("content, said", [
    (b"\xff\xfemysql: {}", "is not UTF-8 text"),
    (None, "is a folder, not a file"),
])
def test_a_config_file_that_can_t_be_read_is_one_config_error(tmp_path, content, said):
    # A UnicodeDecodeError or an IsADirectoryError traceback.
    path = tmp_path / "c.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(config.ConfigError, match=f"config file {path} {said}"):
        config.load(str(path), environ={})


def test_a_secret_file_that_is_not_utf8_is_one_config_error(tmp_path):
    pw = tmp_path / "pw"
    pw.write_bytes(b"caf\xe9")  # latin-1
    with pytest.raises(config.ConfigError, match=r"'mysql.password_file': cannot read .*pw: it "
                                                 r"is not UTF-8 text"):
        config.read_secret_file("mysql.password_file", str(pw))
