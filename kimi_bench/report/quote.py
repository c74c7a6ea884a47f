"""Quoting: text that came from outside (a ``--note``, a file name, an error message, a
report field) made safe for the place it is shown.

Every writer goes through these functions: Markdown (``md``), CSV (``csv_cell``), the
terminal (``terminal``) and HTML (``html_text``). The rules:

- **control characters are shown, never sent**: ESC (ANSI colour and cursor codes), CR, LF,
  TAB, the other C0/C1 controls, DEL, zero-width and bidirectional formatting characters
  become visible escapes (``\\x1b``, ``\\r``, ``\\n``, ``\\u202e``), so a file name can
  neither recolour or rewrite the terminal nor split a table row into two;
- **Markdown**: ``<`` becomes ``&lt;`` (no raw HTML, no ``<url>`` autolink can open) and
  the characters that make links, images, code spans, emphasis and table cells (``[ ] `
  * \\ |``) are backslash-escaped, so ``[x](javascript:alert(1))`` renders as that text and
  is no link (``_`` is left alone: inside a word it is no emphasis, and identifiers such as
  ``median_ms`` read as written);
- **CSV**: a text cell that a spreadsheet would read as a formula (one starting with ``=``,
  ``+``, ``-``, ``@``, TAB or CR; OWASP's CSV injection guidance) gets a leading ``'``; the
  CSV writer quotes separators and quote characters;
- **HTML**: :func:`html.escape` with quotes, after the control characters are made visible.
"""

from __future__ import annotations

import html
import re
from typing import Any

# C0 controls, DEL, C1 controls, zero-width and bidi formatting characters
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# what makes Markdown links, images, code spans, emphasis and table cells
_MD_SPECIAL = re.compile(r"([\\`*\[\]|])")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape_control(m: re.Match[str]) -> str:
    ch = m.group(0)
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(value: Any) -> str:
    """``str(value)`` with every control and bidi character as a visible escape."""
    return _CONTROL.sub(_escape_control, str(value))


def terminal(value: Any) -> str:
    """Text for a terminal (a message, a table cell): no escape sequence reaches it."""
    return visible(value)


def md(value: Any) -> str:
    """Text for one line of Markdown (a paragraph, a list item, a table cell): no HTML,
    no link, image, code span or emphasis made of the text, no line break."""
    text = visible(value).replace("<", "&lt;")  # no tag and no <url> autolink can open
    return _MD_SPECIAL.sub(r"\\\1", text)


def csv_cell(value: Any) -> Any:
    """A CSV cell: numbers and missing values as they are; text with its control
    characters visible and, when it could be read as a formula, a leading ``'``."""
    if not isinstance(value, str):
        return value
    text = visible(value)
    return "'" + text if value.startswith(_FORMULA_START) else text


def html_text(value: Any) -> str:
    """Text for HTML element bodies and attribute values."""
    return html.escape(visible(value), quote=True)
