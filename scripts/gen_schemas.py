"""Write (or with --check, verify) the JSON Schemas in schemas/ from the msgspec types."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout without installing: make the repository's package importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jigcmd.policy.schemas import generate  # noqa: E402 - needs the path set up above

SCHEMAS_DIR = ROOT / "schemas"


def stale_files(directory: Path = SCHEMAS_DIR) -> list[str]:
    """Names of generated schema files that are missing or differ from the generator."""
    return [
        name
        for name, content in generate().items()
        if not (directory / name).is_file() or (directory / name).read_bytes() != content
    ]


def main(argv: list[str] | None = None) -> int:
    """Generate schemas, or report stale ones with --check (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if schemas/ is stale")
    options = parser.parse_args(argv)
    if options.check:
        stale = stale_files()
        for name in stale:
            print(f"stale: schemas/{name} (run scripts/gen_schemas.py)", file=sys.stderr)
        return 1 if stale else 0
    SCHEMAS_DIR.mkdir(exist_ok=True)
    for name, content in generate().items():
        (SCHEMAS_DIR / name).write_bytes(content)
        print(f"wrote schemas/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
