"""The crossing benchmark's pipe blocks (bench.crossing): what the reader process frames is what
the publishing one takes, message for message, with or without keys, and a cut block is said."""
import io

import pytest

from bench.crossing import NO_KEY, frame, unframe


def test_blocks_cross_the_pipe_as_they_were_framed():
    first = [(b"value-1", b"key-1"), (b"", b"k"), (b"v" * 70000, None), (b"\x00\xff", b"")]
    second = [(b"only", b"one")]
    pipe = io.BytesIO(frame(first) + frame(second) + frame([]))
    assert unframe(pipe.read) == first
    assert unframe(pipe.read) == second
    assert unframe(pipe.read) == []  # a block of none: a round's end
    assert unframe(pipe.read) is None  # the pipe's end


def test_a_block_cut_short_is_an_error_not_fewer_messages():
    block = frame([(b"value", b"key"), (b"second", None)])
    for cut in (6, len(block) - 1):
        with pytest.raises(EOFError, match="inside a block"):
            unframe(io.BytesIO(block[:cut]).read)


def test_a_missing_key_is_not_an_empty_one():
    block = frame([(b"a", None), (b"b", b"")])
    assert NO_KEY.to_bytes(4, "little") in block
    assert unframe(io.BytesIO(block).read) == [(b"a", None), (b"b", b"")]
