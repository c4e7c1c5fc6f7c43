"""Write (or with --check, verify) the JSON Schemas in schemas/ and their copy in the package.

schemas/ is the source of truth (the generated files and the contract's descriptor copy);
jigcmd/schemas/ is the same files byte for byte, so that an installed jigcmd carries them.
"""

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
PACKAGED_DIR = ROOT / "jigcmd" / "schemas"


def stale_files(directory: Path = SCHEMAS_DIR) -> list[str]:
    """Names of generated schema files that are missing or differ from the generator."""
    return [
        name
        for name, content in generate().items()
        if not (directory / name).is_file() or (directory / name).read_bytes() != content
    ]


def _contents(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*.json"))}


def stale_copies(source: Path = SCHEMAS_DIR, copy: Path = PACKAGED_DIR) -> list[str]:
    """Names whose file in `copy` is missing, differs from `source`'s, or is not in `source`."""
    wanted = _contents(source)
    held = _contents(copy) if copy.is_dir() else {}
    names = wanted.keys() | held.keys()
    return sorted(name for name in names if wanted.get(name) != held.get(name))


def _write_copies() -> None:
    PACKAGED_DIR.mkdir(exist_ok=True)
    wanted = _contents(SCHEMAS_DIR)
    for name in stale_copies():
        if name in wanted:
            (PACKAGED_DIR / name).write_bytes(wanted[name])
            print(f"copied schemas/{name} to jigcmd/schemas/")
        else:
            (PACKAGED_DIR / name).unlink()
            print(f"removed jigcmd/schemas/{name}: not in schemas/")


def main(argv: list[str] | None = None) -> int:
    """Generate schemas and copy them into the package, or report stale ones with --check."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="fail if schemas/ or its copy is stale"
    )
    options = parser.parse_args(argv)
    if options.check:
        stale = [f"schemas/{name}" for name in stale_files()]
        stale += [f"jigcmd/schemas/{name}" for name in stale_copies()]
        for path in stale:
            print(f"stale: {path} (run scripts/gen_schemas.py)", file=sys.stderr)
        return 1 if stale else 0
    SCHEMAS_DIR.mkdir(exist_ok=True)
    for name, content in generate().items():
        (SCHEMAS_DIR / name).write_bytes(content)
        print(f"wrote schemas/{name}")
    _write_copies()
    return 0


if __name__ == "__main__":
    sys.exit(main())
