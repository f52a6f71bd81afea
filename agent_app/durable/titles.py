"""Short chat titles from the first user message: a cheap rule, no model call.

A list of chats is read at a glance, so a title is the gist of the opening message rather
than the message itself: its first line, then its first sentence, then (when that is still
long) its first clause, cut at a word to at most ``AUTO_TITLE_LENGTH`` characters, with
no punctuation left at the end. "What time is it in Tokyo? I fly tomorrow." becomes
"What time is it in Tokyo". A chat keeps the title it got (``ChatSession.title`` is only
written while empty), so a person's own title is never replaced.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["AUTO_TITLE_LENGTH", "short_title"]

#: Longest title the rule makes (a person may type up to 200 characters).
AUTO_TITLE_LENGTH = 48
#: A clause shorter than this says too little to stand alone: the sentence goes on.
_MIN_CLAUSE = 12

#: The end of a sentence: its mark, then a space or the end of the text.
_SENTENCE_END = re.compile("[.!?\u2026\u3002\uff01\uff1f](?=\\s|$)")
#: Where a clause ends: a comma, semicolon or colon before a space, or a dash between spaces.
_CLAUSE_END = re.compile("[,;:](?=\\s)|\\s[-\u2013\u2014]\\s")
#: What may not end a title: punctuation, quotes and brackets left open, spaces.
_TRAILING = " \t.,;:!?\u2026-\u2013\u2014'\"\u201c\u201d\u2018\u2019([{\u00ab"
#: Markdown a message may open with: a heading, a quote, a list bullet.
_LEADING_MARKUP = re.compile(r"^(?:#{1,6}\s+|>\s*|[-*+]\s+)+")


def short_title(content: Any) -> str:
    """A short title for a chat whose first user message is ``content`` ("" if blank)."""
    text = _plain(content)
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    line = " ".join(_LEADING_MARKUP.sub("", line).split()) or " ".join(line.split())
    if not line:
        return ""
    end = _SENTENCE_END.search(line)
    sentence = line[: end.start()] if end and end.start() >= _MIN_CLAUSE // 2 else line
    if len(sentence) > AUTO_TITLE_LENGTH:
        sentence = _first_clause(sentence)
    title = _cut(sentence).rstrip(_TRAILING)
    return title or line[:AUTO_TITLE_LENGTH].strip()


def _plain(content: Any) -> str:
    """The text of a message's content (a string, or a list of parts)."""
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _first_clause(sentence: str) -> str:
    """The sentence up to the first clause end that leaves enough words to stand alone."""
    for match in _CLAUSE_END.finditer(sentence):
        if _MIN_CLAUSE <= match.start() <= AUTO_TITLE_LENGTH:
            return sentence[: match.start()]
    return sentence


def _cut(text: str) -> str:
    """``text`` cut at a word to at most ``AUTO_TITLE_LENGTH`` characters (a single
    longer word, such as a link, is cut where the limit falls)."""
    if len(text) <= AUTO_TITLE_LENGTH:
        return text
    head = text[: AUTO_TITLE_LENGTH + 1]
    space = head.rfind(" ")
    return head[:space] if space > 0 else text[:AUTO_TITLE_LENGTH]
