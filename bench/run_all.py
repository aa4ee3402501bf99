"""``make bench``: run every ``bench/*.py`` that defines ``main()``; each writes its BENCHMARKS.md section."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    sys.path.insert(0, str(HERE))
    only = set(sys.argv[1:])
    failed = []
    for path in sorted(HERE.glob("*.py")):
        if path.name.startswith("_") or path.name == "run_all.py" or (only and path.stem not in only):
            continue
        spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        print(f"== bench/{path.name}", flush=True)
        try:
            spec.loader.exec_module(module)
            if hasattr(module, "main"):
                module.main()
        except Exception:  # one broken benchmark must not hide the others' results
            traceback.print_exc()
            failed.append(path.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
