"""The ``host.*`` fields: the machine tunegate runs on (the client), all measured here.

``host.cpu`` is the CPU model from ``/proc/cpuinfo`` (``platform.processor()`` elsewhere),
``host.cores`` the logical CPUs (``os.cpu_count()``), ``host.kernel`` the OS and its release
(``Linux 6.8.0-45-generic``: ``platform.system()``, ``platform.release()``), ``host.python``
and ``host.tunegate`` the versions running.
"""

from __future__ import annotations

import os
import platform

from tunegate import __version__
from tunegate.fingerprint.commands import read_text
from tunegate.fingerprint.fields import Field, measured, unknown
from tunegate.fingerprint.smi import parse_cpu_model

__all__ = ["cpu_model", "probe_host"]


def cpu_model() -> Field:
    """The CPU's model name, measured here."""
    info = read_text("/proc/cpuinfo")
    model = parse_cpu_model(info) if info else None
    if model:
        return measured(model, "/proc/cpuinfo")
    if platform.processor():
        return measured(platform.processor(), "platform.processor()")
    return unknown("neither /proc/cpuinfo nor platform.processor() names the CPU")


def probe_host() -> dict[str, Field]:
    """The ``host.*`` fields; never raises."""
    cores = os.cpu_count()
    kernel = platform.release()
    return {
        "host.cpu": cpu_model(),
        "host.cores": (measured(cores, "os.cpu_count(): logical CPUs") if cores
                       else unknown("os.cpu_count() cannot tell")),
        "host.kernel": (measured(f"{platform.system()} {kernel}".strip(),
                                 "platform.system() and platform.release()")
                        if kernel else unknown("platform.release() is empty")),
        "host.python": measured(platform.python_version(), "platform.python_version()"),
        "host.tunegate": measured(__version__, "tunegate.__version__"),
    }
