"""Runs kvlab's command line with some modules made unimportable, as if not installed.

``python tests/cli/no_engine.py ARGS`` is ``kvlab ARGS`` where importing a module named
in $KVLAB_TEST_BLOCK (comma-separated top-level names) raises ModuleNotFoundError, and
each such attempt is appended to the file $KVLAB_TEST_BLOCK_LOG (even one the code
catches). The blocker goes first on ``sys.meta_path`` before kvlab is imported.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

BLOCKED = set(filter(None, os.environ.get("KVLAB_TEST_BLOCK", "").split(",")))
LOG = os.environ.get("KVLAB_TEST_BLOCK_LOG")


class Blocker:
    """A meta path finder that refuses the blocked modules."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: ModuleType | None = None
                  ) -> ModuleSpec | None:
        if name.split(".")[0] not in BLOCKED:
            return None  # the other finders decide
        if LOG:
            with open(LOG, "a", encoding="utf-8") as log:
                log.write(f"{name}\n")
        raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)",
                                  name=name)


if __name__ == "__main__":
    sys.path.pop(0)  # this folder: tests/cli must not shadow anything
    sys.meta_path.insert(0, Blocker)
    from kvlab.cli import main

    sys.argv = ["kvlab", *sys.argv[1:]]
    main()
