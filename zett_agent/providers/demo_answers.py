"""The offline demo model's written answers: what a page can show besides tool calls.

``DemoModel`` (``demo.py``) picks one of these by the words of the request: fenced code in
two languages (highlighting and the Copy buttons), a Markdown table, and an answer long
enough to watch it stream and press Stop. They are fixed texts, so the demo stays
deterministic and offline; each is real content, not filler.
"""

from __future__ import annotations

__all__ = ["CODE_ANSWER", "LONG_ANSWER", "TABLE_ANSWER"]

CODE_ANSWER = """\
Here is one small function, word frequencies, in two languages. Each block has a **Copy** \
button.

```python
from collections import Counter
import re


def top_words(text: str, count: int = 3) -> list[tuple[str, int]]:
    \"\"\"The `count` most frequent words of `text`, most frequent first.\"\"\"
    words = re.findall(r"[a-z']+", text.lower())
    return Counter(words).most_common(count)


print(top_words("the cat and the hat and the bat"))
# [('the', 3), ('and', 2), ('cat', 1)]
```

```javascript
function topWords(text, count = 3) {
  const counts = new Map();
  for (const word of text.toLowerCase().match(/[a-z']+/g) ?? []) {
    counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  return [...counts].sort((a, b) => b[1] - a[1]).slice(0, count);
}

console.log(topWords("the cat and the hat and the bat"));
// [["the", 3], ["and", 2], ["cat", 1]]
```

Both keep the first-seen order among equal counts: Python's `Counter.most_common` and \
JavaScript's `Array.prototype.sort` are stable."""

TABLE_ANSWER = """\
Three ways to run zett, side by side:

| Setup | Database | Channel layer | Processes | Good for |
|---|---|---|---|---|
| `manage.py runserver` | SQLite | in memory | 1 | trying it, development |
| `manage.py runworkers` | PostgreSQL | Redis | 2 or more | scale-out on one machine |
| daphne or uvicorn behind a load balancer | PostgreSQL | Redis | any | production |

Every setup keeps the same guarantees: nothing typed or approved is lost, and a run \
outlives the page that started it."""

LONG_ANSWER = """\
## How an answer reaches this page

This answer is long on purpose: it streams word by word, so you can watch it arrive and \
press **Stop** (or Escape) at any point. What was written until then is kept and marked \
stopped.

**1. Your message is stored first.** When you press Enter, the page sends one \
`user_message` frame over its WebSocket. The server writes the message to the database \
before it asks the model anything, so even a crash right after the send loses nothing you \
typed. The chat itself is created by that first message; opening an empty chat stores \
nothing.

**2. A run starts.** Each request becomes a *run*: a row that says how it ended \
(completed, stopped, failed, interrupted or paused). The run belongs to the chat, not to \
the page. Close the tab, reload it or open a second one: the run goes on, and every page \
that comes back is replayed what it missed and then follows live.

**3. The model streams.** The agent runtime calls the model and forwards every piece of \
text as it arrives. Each frame carries a sequence number, so a page that lost its link \
reconnects with the last number it saw and continues exactly there, with nothing lost and \
nothing repeated.

**4. Tools run, some only with your consent.** When the model asks for a tool, the page \
shows a card with its arguments and, later, its result. A tool that changes something, \
like saving a note, first asks for your approval; the question is stored, so you can \
answer it after a restart, or tomorrow, and the run continues from there.

**5. The answer is stored with the run's end.** The final text and the run's outcome are \
written in one transaction, and the page's footer then shows the time and the tokens it \
took. Regenerate or Edit replaces the turn on every open page; the server keeps the old \
one, marked superseded.

That is the whole path. Try *save a note: water the plants* to see an approval, or \
*show me a code example* for highlighted code."""
