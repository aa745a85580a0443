"""The bench's CPU steal share, from two /proc/stat snapshots."""
from bench import env

#          user nice system idle iowait irq softirq steal guest guest_nice
BEFORE = "cpu  1000 0 200 5000 10 0 5 100 0 0\ncpu0 1 2 3\n"
AFTER = "cpu  1300 0 300 5400 10 0 5 300 0 0\ncpu0 1 2 3\n"  # +1000 jiffies, 200 of them stolen


def test_steal_is_the_stolen_share_of_all_cpu_time_between_the_snapshots(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(BEFORE)
    steal = env.Steal(str(stat))
    stat.write_text(AFTER)
    assert steal.stop() == 20.0 and steal.pct == 20.0


def test_no_proc_stat_means_no_number(tmp_path):
    steal = env.Steal(str(tmp_path / "missing"))
    assert steal.stop() is None


def test_busy_is_the_share_the_machine_s_own_processes_used(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(BEFORE)
    steal = env.Steal(str(stat))
    stat.write_text(AFTER)
    steal.stop()
    # user +300 and system +100 of 1000 jiffies; idle (+400) and steal (+200) are not busy.
    assert steal.busy_pct == 40.0
