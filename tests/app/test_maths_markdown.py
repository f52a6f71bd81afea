"""Which dollar signs start maths (``maths.js``'s marked extensions), checked under Node
with the vendored marked: formulas become placeholders holding their TeX as escaped text,
prices and code stay as written."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.app.servers import ROOT

STATIC = ROOT / "agent_app" / "static" / "agent_app"

DRIVER = """
import { Marked } from "%(marked)s";
import { mathExtensions } from "%(maths)s";
const markdown = new Marked({ gfm: true });
markdown.use(mathExtensions);
const sources = JSON.parse(process.argv[1]);
console.log(JSON.stringify(sources.map((source) => markdown.parse(source))));
"""

CASES = {
    "Tea is $5 and coffee is $10.": "<p>Tea is $5 and coffee is $10.</p>",
    "US$5-$10, or $5/$10": "<p>US$5-$10, or $5/$10</p>",
    "$ x $ and $x $": "<p>$ x $ and $x $</p>",
    r"\$5 and $x$": '<p>$5 and <span class="math" data-math="inline">x</span></p>',
    "`$x$` stays code": "<p><code>$x$</code> stays code</p>",
    "$a_1 * b_2$ and $x^2$": (
        '<p><span class="math" data-math="inline">a_1 * b_2</span> and '
        '<span class="math" data-math="inline">x^2</span></p>'
    ),
    "$x<y$": '<p><span class="math" data-math="inline">x&lt;y</span></p>',
    "Say $$e=mc^2$$ inline": (
        '<p>Say <span class="math" data-math="display">e=mc^2</span> inline</p>'
    ),
    "$$\n\\int_0^1 x\\,dx\n$$\n\nafter": (
        '<div class="math math--display" data-math="display">\\int_0^1 x\\,dx</div>\n<p>after</p>'
    ),
    '$"><img src=x onerror=alert(1)>$': (
        '<p><span class="math" data-math="inline">&quot;&gt;&lt;img src=x '
        "onerror=alert(1)&gt;</span></p>"
    ),
}


def test_dollar_signs_start_maths_only_around_a_formula() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is needed (.ci/run installs it)")
    script = DRIVER % {
        "marked": (STATIC / "vendor" / "marked" / "marked.esm.js").as_uri(),
        "maths": (STATIC / "maths.js").as_uri(),
    }
    done = subprocess.run(
        [node, "--input-type=module", "-e", script, json.dumps(list(CASES))],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    rendered = [html.strip() for html in json.loads(done.stdout)]
    assert dict(zip(CASES, rendered, strict=True)) == CASES
