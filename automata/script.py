"""Files of several queries: CEL or patterns, each ended by ``;``.

A query file may hold one query or many (a cookbook recipe that publishes a stream and reads
it); the CLI splits it before compiling each (``cesar run --query``, ``cesar subscribe``).
Only strings and comments are read here, so the split costs no parser.
"""

from __future__ import annotations

import re

_SCRIPT = re.compile(
    r"(?P<comment>--[^\n]*|/\*(?:[^*]|\*(?!/))*(?:\*/)?)|(?P<end>;)"
    r"|'(?:[^']|'')*'?|‘[^’]*’?|\S"
)
"""What a script's split reads: comments, ``;``, strings (even unterminated), any other
character but a space."""


def split_script(text: str) -> list[str]:
    r"""The queries of a file that holds several, each ended by ``;`` (the last one's optional).

    Each query comes with everything before it blanked (newlines kept), so an error in it
    names the line and column of the file.  A ``;`` in a string or a comment splits nothing;
    a piece with nothing but spaces and comments is no query.  O(len(text)) per query.

    >>> [q.strip() for q in split_script("S PUBLISH A;\n-- b; c\nFILTER{N = ';'} S;")]
    ['S PUBLISH A', "-- b; c\nFILTER{N = ';'} S"]
    >>> split_script("S PUBLISH A;\n  T")[1]
    '            \n  T'
    """
    pieces, start, content = [], 0, False
    for match in _SCRIPT.finditer(text):
        if match.lastgroup == "end":
            if content:
                pieces.append((start, match.start()))
            start, content = match.end(), False
        elif match.lastgroup != "comment":
            content = True
    if content:
        pieces.append((start, len(text)))
    return [re.sub(r"[^\n]", " ", text[:begin]) + text[begin:end] for begin, end in pieces]
