"""EWAH compressed bitmaps, as git stores them in the split index's ``link`` extension.

A serialised bitmap is: the bit count (32 bits), the number of 64-bit words (32 bits), the
words, and the position of the last marker word (32 bits), all big-endian. The words are a
marker ("running length word": bit 0 the value of a run, bits 1-32 how many 64-bit words of
that value, bits 33-63 how many literal words follow) and then its literal words, repeated.
Bit ``n`` is bit ``n % 64`` (least significant first) of the ``n // 64``-th word.

The split index sets a few bits out of tens of thousands (the entries a save replaced), so
the encoder only writes runs of zero words and literal words; the decoder reads runs of ones
too, which git's own writer may produce.
"""

from __future__ import annotations

import struct

from gitmem.errors import UnsupportedIndex

_RUN_MAX = (1 << 32) - 1
_LITERAL_MAX = (1 << 31) - 1


def encode(positions: list[int]) -> bytes:
    """The serialised bitmap with exactly the bits at ``positions`` (ascending) set."""
    words: list[tuple[int, int]] = []  # (word number, value) of the non-zero words
    for bit in positions:
        number, value = bit >> 6, 1 << (bit & 63)
        if words and words[-1][0] == number:
            words[-1] = (number, words[-1][1] | value)
        elif words and words[-1][0] > number:
            raise ValueError("bitmap positions must ascend")
        else:
            words.append((number, value))
    out: list[int] = []
    marker = 0  # index in ``out`` of the marker word being filled
    out.append(0)
    next_word = 0  # the word number the stream has reached
    literals = 0
    for number, value in words:
        gap = number - next_word
        if gap or literals == _LITERAL_MAX:
            if literals or out[marker] >> 1 & _RUN_MAX:
                marker, literals = len(out), 0  # a new marker: this one has its literals
                out.append(0)
            while gap > _RUN_MAX:  # more zero words than one marker can count
                out[marker] = _RUN_MAX << 1
                marker = len(out)
                out.append(0)
                gap -= _RUN_MAX
            out[marker] = gap << 1
        out.append(value)
        literals += 1
        out[marker] = (out[marker] & ((1 << 33) - 1)) | (literals << 33)
        next_word = number + 1
    size = positions[-1] + 1 if positions else 0
    return b"".join(
        (
            struct.pack(">II", size, len(out)),
            struct.pack(f">{len(out)}Q", *out),
            struct.pack(">I", marker),
        )
    )


def decode(data: bytes | memoryview, pos: int = 0) -> tuple[list[int], int]:
    """The set bits (ascending) of the bitmap serialised at ``data[pos:]``, and the offset
    just past it. Raises UnsupportedIndex if it is cut short or inconsistent."""
    if len(data) - pos < 8:
        raise UnsupportedIndex("EWAH bitmap cut short (no header)")
    _size, count = struct.unpack_from(">II", data, pos)
    end = pos + 8 + 8 * count + 4
    if end > len(data):
        raise UnsupportedIndex(f"EWAH bitmap cut short ({count} words announced)")
    words = struct.unpack_from(f">{count}Q", data, pos + 8)
    (last_marker,) = struct.unpack_from(">I", data, end - 4)
    if count and last_marker >= count:
        raise UnsupportedIndex(f"EWAH bitmap marker position {last_marker} past {count} words")
    bits: list[int] = []
    at = 0
    bit = 0
    while at < count:
        marker = words[at]
        run = (marker >> 1) & _RUN_MAX
        if marker & 1:
            bits.extend(range(bit, bit + run * 64))
        bit += run * 64
        literals = marker >> 33
        at += 1
        if at + literals > count:
            raise UnsupportedIndex("EWAH bitmap announces more literal words than it has")
        for word in words[at : at + literals]:
            while word:
                low = word & -word
                bits.append(bit + low.bit_length() - 1)
                word ^= low
            bit += 64
        at += literals
    return bits, end
