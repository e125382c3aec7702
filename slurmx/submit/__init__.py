"""`slurmx submit`: job specs, variants rendered from templates, submission modes, groups.

`slurmx.submit(spec)` is also the Python API: this package module is callable (see `api.submit`).
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    """Lets `slurmx.submit(spec)` call the API while `slurmx.submit.spec` stays a submodule."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from slurmx.submit.api import submit

        return submit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
