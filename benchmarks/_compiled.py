"""The package byte-compiled before a benchmark times it (not a test fixture)."""

from __future__ import annotations

import compileall
from pathlib import Path


def byte_compile_package() -> None:
    """Byte-compile the package's modules, as installing it (not editable) does: with
    ``PYTHONDONTWRITEBYTECODE`` set (as on these machines) an editable install would
    otherwise compile every module from source in each timed process (a third of a
    second), a cost no installed copy pays."""
    import analytics

    compileall.compile_dir(Path(analytics.__file__).resolve().parent, quiet=1)
