"""The README's runtime example runs and prints what it promises."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_runtime_example_runs_and_prints_the_tool_result_and_the_answer():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    # The runtime's own example: the one block that runs an agent by itself.
    (example,) = [block for block in blocks if "asyncio.run(" in block]
    result = subprocess.run(
        [sys.executable, "-c", example], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "[add -> 5]" in result.stdout
    assert "2 + 3 = 5" in result.stdout
