#!/usr/bin/env python3
"""Regenerate schemas/ (the JSON Schema of each command's output) from llmc_cli/cli/output_schemas.py.

    python scripts/gen_schemas.py            # write the files
    python scripts/gen_schemas.py --check    # exit 1 and name the stale files

The definitions live in the code; schemas/ is what users read and link (and what the tests
validate every JSON output against), so a test fails when the two disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmc_cli.cli.output_schemas import files  # noqa: E402

DIRECTORY = "schemas"


def stale(root: Path = ROOT) -> list[str]:
    """Files that differ from the definitions, are missing, or belong to no command any more."""
    wanted = files()
    folder = root / DIRECTORY
    out = [name for name, text in wanted.items()
           if not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text]
    leftovers = {p.name for p in folder.glob("*.json")} - set(wanted) if folder.is_dir() else set()
    return sorted(f"{DIRECTORY}/{name}" for name in [*out, *leftovers])


def write(root: Path = ROOT) -> list[str]:
    wanted = files()
    folder = root / DIRECTORY
    folder.mkdir(exist_ok=True)
    for name, text in wanted.items():
        (folder / name).write_text(text, encoding="utf-8")
    for path in folder.glob("*.json"):
        if path.name not in wanted:
            path.unlink()
    return sorted(wanted)


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        names = stale()
        for name in names:
            print(f"stale: {name} (run python scripts/gen_schemas.py)", file=sys.stderr)
        return 1 if names else 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    print(f"wrote {len(write())} files to {DIRECTORY}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
