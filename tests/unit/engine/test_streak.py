"""A chunk's failed tries of one kind in a row: their waits, and which of them are said."""
from streamer.engine.streak import LATER_MOST_S, SAID_EVERY_S, SAID_FIRST, Streak
from tests.unit.engine_parts import FakeClock


def test_the_waits_double_up_to_the_most_and_a_new_streak_starts_from_the_first():
    streak = Streak(FakeClock(step=0))
    assert [streak.again()[0] for _ in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    streak.end()
    assert streak.times == 0 and streak.again() == (0.1, True)


def test_a_streak_of_any_length_keeps_the_longest_wait():
    # 0.1 * 2 ** 1024 is no float: a lock held ~85 min (1,024 tries 5 s apart) raised
    # OverflowError and stopped the snapshot's stream.
    clock = FakeClock(step=0)
    streak = Streak(clock)
    for _ in range(20000):
        wait, _ = streak.again()
        clock.now += wait
    assert wait == LATER_MOST_S and streak.times == 20000


def test_the_first_tries_are_said_then_one_a_minute_with_the_count_and_time_so_far():
    clock = FakeClock(step=0)
    streak = Streak(clock)
    said = []
    for _ in range(100):  # 0.1 .. 3.2 s apart, then 5 s: ~480 s in all
        wait, say = streak.again()
        if say:
            said.append((streak.times, clock.now))
        clock.now += wait
    assert [times for times, _ in said[:SAID_FIRST]] == [1, 2, 3]
    gaps = [b - a for (_, a), (_, b) in zip(said[SAID_FIRST - 1:], said[SAID_FIRST:])]
    assert gaps and all(SAID_EVERY_S <= gap < SAID_EVERY_S + LATER_MOST_S for gap in gaps), gaps
    assert str(streak) == f"100 times in a row now, over {clock.now - 1000:.0f} s"  # since the first


def test_its_words_count_one_try_as_one_time():
    clock = FakeClock(step=0)
    streak = Streak(clock)
    streak.again()
    clock.now += 2
    assert str(streak) == "1 time in a row now, over 2 s"
