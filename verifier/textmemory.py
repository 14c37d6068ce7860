"""What a UTF-8 text costs once Python decodes it, measured on its bytes before it is decoded (issue #49).

A Python string takes 1, 2 or 4 bytes a character: the width of its widest character (up to U+00FF, up to U+FFFF,
beyond). A 64 MiB answer of plain text is a 64 MiB string; the same answer ending in one emoji is a 256 MiB one,
and every copy of it (the journal line decoded, the record's body, the answer parsed from it) is as wide. Byte caps
alone cannot bound that memory, so the readers and writers that hold a whole text count it here first:

- `characters`: the characters the bytes decode to (decoded a 1 MiB piece at a time, nothing kept);
- `width`: the bytes a character of the decoded string takes, from the lead bytes present (a 4-byte sequence:
  4; a 2- or 3-byte sequence beyond U+00FF: 2; else 1);
- `parsed_width`: the widest string JSON parsed from the text can hold. A JSON escape widens a narrow line: an
  ASCII line holding `\\ud83d\\ude00` parses to a string of width 4. Any `\\u` escape beyond `\\u00ff` counts as
  width 2, any of a high surrogate as 4, whether or not a backslash before it makes it literal text (`\\\\u4e2d`): an
  upper bound, found with two regex searches instead of a parse.

Bytes that are not valid UTF-8 fail to decode afterwards; counted here they only overestimate.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_FOUR_BYTE_LEADS = tuple(bytes([b]) for b in range(0xF0, 0xF8))  # each looked for with memchr: a regex class is 20x slower
_WIDE_LEAD = re.compile(rb"[\xc4-\xef]")  # 0xC4 80 is U+0100, the first character beyond Latin-1
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB]")  # a high surrogate: pairs into a character beyond U+FFFF
_WIDE_ESCAPE = re.compile(rb"\\u(?!00)[0-9a-fA-F]{4}")
_PIECE = 1 << 20


@dataclass(frozen=True)
class TextSize:
    """The measure of one UTF-8 text (see the module doc)."""

    size: int
    """its bytes"""
    characters: int
    width: int
    parsed_width: int

    @property
    def decoded(self) -> int:
        """Bytes of the string the text decodes to."""
        return self.characters * self.width

    @property
    def parsed(self) -> int:
        """An upper bound on the bytes of the strings JSON parsed from the text holds together."""
        return self.characters * self.parsed_width


def measure(data: bytes | bytearray, *, json_escapes: bool = True) -> TextSize:
    """`data` measured without holding it decoded: one pass to count characters (in pieces of 1 MiB) and
    regex searches that stop at the first hit. `json_escapes`: also look for `\\u` escapes (`parsed_width`)."""
    view = memoryview(data).cast("B")
    size = len(view)
    if _is_ascii(view):
        characters, width = size, 1
    else:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a malformed byte counts one character
        characters = sum(len(decoder.decode(view[i:i + _PIECE])) for i in range(0, size, _PIECE))
        characters += len(decoder.decode(b"", final=True))
        width = 4 if any(data.find(lead) >= 0 for lead in _FOUR_BYTE_LEADS) else 2 if _WIDE_LEAD.search(view) else 1
    parsed_width = width
    if json_escapes and width < 4:
        if _SURROGATE_ESCAPE.search(view):
            parsed_width = 4
        elif width < 2 and _WIDE_ESCAPE.search(view):
            parsed_width = 2
    return TextSize(size, characters, width, parsed_width)


def _is_ascii(view: memoryview) -> bool:
    return all(bytes(view[i:i + _PIECE]).isascii() for i in range(0, len(view), _PIECE))
