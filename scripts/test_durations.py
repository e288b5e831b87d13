"""The suite's time by test module, from pytest's JUnit XML (`pytest --junitxml=FILE`): the table in docs/testing.md.

    .venv/bin/python scripts/test_durations.py FILE [FILE ...] [--top N]

Each module's row says what it proves (its docstring's first sentence) and what its tests pay for besides their own
work, read from the module's source: a Spark application per job (`submit_env`, spark-submit), a job on the running
Spark Connect server (`env`), DAG runs through the running scheduler (`api`, `served`), an `airflow dags test` process
per run, a Chromium session, a platform service restarted or crashed.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# What a module's source shows it pays for, by the words that give it away.
SETUP_MARKERS = (
    ("spark-submit per job", re.compile(r"\bsubmit_env\b|SUBMIT_CONN_ID")),
    ("Spark Connect jobs", re.compile(r"\benv\b.*\bspark_job\(|\.ingest_all\(|def test_\w+\(env\b")),
    ("scheduler DAG runs", re.compile(r"\bapi\.trigger\(|\bserved\b")),
    ("`airflow dags test`", re.compile(r"\brun_dag\(|\"dags\", \"test\"")),
    ("Chromium", re.compile(r"\bbrowser\b")),
    ("service restarts", re.compile(r"platform\(\"(restart|stop|crash)\"|kill9|restart_server|\.kill\(\)")),
)


@dataclass
class Module:
    path: str
    seconds: float = 0.0
    tests: int = 0
    slowest: list[tuple[float, str]] = field(default_factory=list)


def read_junit(paths: list[Path]) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            if case.find("skipped") is not None:
                continue
            classname = case.get("classname", "")
            file = classname.replace(".", "/") + ".py"
            module = modules.setdefault(file, Module(file))
            seconds = float(case.get("time", 0))
            module.seconds += seconds
            module.tests += 1
            module.slowest.append((seconds, bare_name(case.get("name", ""))))
    return modules


def bare_name(name: str) -> str:
    """The name without the group pytest-xdist's `--dist loadgroup` appends (`test_x@disruptive`); an `@` inside the
    parameters (`test_y[@hourly]`) is the name's own."""
    return name[: name.rfind("@")] if name.rfind("@") > name.rfind("]") else name


def proves(path: Path) -> str:
    """The first sentence of the module's docstring."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    except (OSError, SyntaxError):
        return ""
    first = " ".join(doc.split())
    end = first.find(". ")
    return (first if end < 0 else first[: end + 1])[:160]


def pays(path: Path) -> str:
    try:
        source = path.read_text()
    except OSError:
        return ""
    return ", ".join(name for name, pattern in SETUP_MARKERS if pattern.search(source))


def area(file: str) -> str:
    parts = file.split("/")
    return "/".join(parts[1:3]) if len(parts) > 3 else parts[1]


def markdown(modules: dict[str, Module], top: int) -> str:
    total = sum(m.seconds for m in modules.values())
    by_area: dict[str, list[Module]] = defaultdict(list)
    for m in modules.values():
        by_area[area(m.path)].append(m)
    lines = [
        f"{sum(m.tests for m in modules.values()):,} tests, {total / 60:.1f} min of test time in all (setup and "
        "teardown included; tests run side by side count each their own, so this exceeds the suite's wall time).",
        "",
        "| area | tests | minutes | share |",
        "|---|---:|---:|---:|",
    ]
    for name, group in sorted(by_area.items(), key=lambda kv: -sum(m.seconds for m in kv[1])):
        seconds = sum(m.seconds for m in group)
        lines.append(f"| {name} | {sum(m.tests for m in group)} | {seconds / 60:.1f} | {seconds / total:.0%} |")
    lines += [
        "",
        "| module | tests | seconds | slowest test (s) | what it proves | what its tests pay for |",
        "|---|---:|---:|---|---|---|",
    ]
    for m in sorted(modules.values(), key=lambda m: -m.seconds)[:top]:
        seconds, name = max(m.slowest)
        lines.append(
            f"| `{m.path.removeprefix('tests/')}` | {m.tests} | {m.seconds:.0f} | `{name}` ({seconds:.0f}) | "
            f"{proves(REPO / m.path)} | {pays(REPO / m.path)} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=40, help="modules in the second table")
    args = parser.parse_args(argv)
    print(markdown(read_junit(args.junit), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
