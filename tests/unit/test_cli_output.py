"""What a command does when the reader of its output goes away first."""
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
