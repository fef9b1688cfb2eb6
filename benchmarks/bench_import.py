"""Time of ``import idee_notebook_agent`` in a fresh interpreter, against ``import json`` as baseline."""

from __future__ import annotations

import statistics
import subprocess
import sys

RUNS = 7


def timed(statement: str) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    base = statistics.median(timed("import json") for _ in range(RUNS))
    pkg = statistics.median(timed("import idee_notebook_agent") for _ in range(RUNS))
    core = statistics.median(timed("from idee_notebook_agent import Agent") for _ in range(RUNS))
    print(f"import json (baseline):            {base * 1000:7.2f} ms")
    print(f"import idee_notebook_agent:        {pkg * 1000:7.2f} ms (target ≤ 300 ms)")
    print(f"from idee_notebook_agent import Agent: {core * 1000:7.2f} ms (loads core, openai-free)")


if __name__ == "__main__":
    main()
