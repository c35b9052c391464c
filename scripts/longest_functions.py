"""The longest functions of each product package, by lines from ``def`` to the last line of the body.

.venv/bin/python scripts/longest_functions.py [--top 5] [--over 50]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "planner", "models", "lab", "cli", "spark", "simulator")


def functions(package: str) -> list[tuple[int, str]]:
    """(length, ``path:Class.function``) of every function under ``package``."""
    found: list[tuple[int, str]] = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT)

        def visit(node: ast.AST, prefix: str, where: Path = where) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    end = child.end_lineno or child.lineno
                    found.append((end - start + 1, f"{where}:{prefix}{child.name}"))
                    visit(child, f"{prefix}{child.name}.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")

        visit(tree, "")
    return sorted(found, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=5, help="functions listed per package")
    parser.add_argument("--over", type=int, default=None, help="list every function longer than this instead")
    args = parser.parse_args()
    for package in PACKAGES:
        rows = functions(package)
        shown = [r for r in rows if r[0] > args.over] if args.over is not None else rows[: args.top]
        print(f"{package}: {len(rows)} functions")
        for length, name in shown:
            print(f"  {length:4d}  {name}")


if __name__ == "__main__":
    main()
