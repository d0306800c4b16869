"""Parsers for what the vendor tools and the kernel print; pure functions of text, no I/O.

Formats (each parser's test quotes a real capture):

* ``nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader,nounits``:
  one line per GPU, ``NVIDIA H100 80GB HBM3, 81559, 550.54.15`` (memory in MiB, ``[N/A]``
  where a GPU has no dedicated memory).
* ``nvidia-smi --version`` (``CUDA Version        : 12.4``) or the header of plain
  ``nvidia-smi`` (``... CUDA Version: 12.4 |``): the newest CUDA the driver supports.
* ``rocm-smi --showproductname --showmeminfo vram --showdriverversion --json``: one object per
  ``cardN`` (``Card Series``, older releases ``Card series``; ``VRAM Total Memory (B)``) and a
  ``system`` object with ``Driver version`` (rocm_smi.py's ``printLog`` / ``printSysLog``).
* ``npu-smi info``: a table; the header names the driver package (``npu-smi 24.1.rc1
  Version: 24.1.rc1``), each NPU has a name row (``| 0  910B3  | OK  | ...``) and one row per
  chip (``| 0  | 0000:C1:00.0 | 0  0 / 0  3318 / 65536 |``) whose last ``used / total`` pair is
  its HBM in MB; the process table after it is ignored.
* CANN's ``ascend_toolkit_install.info`` (``version=8.0.RC2``), ROCm's ``.info/version``
  (``6.1.2-119``), ``/proc/cpuinfo``, ``/proc/meminfo``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Device",
    "NpuTable",
    "RocmReport",
    "parse_cann_info",
    "parse_cpu_model",
    "parse_cuda_version",
    "parse_mem_total_mib",
    "parse_npu_table",
    "parse_nvidia_csv",
    "parse_rocm_json",
    "parse_rocm_version",
]

_CUDA = re.compile(r"CUDA Version\s*:\s*([0-9]+(?:\.[0-9]+)*)")
_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")
_NPU_VERSION = re.compile(r"Version:\s*(\S+)")


@dataclass(frozen=True, slots=True)
class Device:
    """One accelerator as a tool listed it.

    Attributes:
        name: Its name as printed (``None`` when the tool gave none).
        memory_mib: Its memory in MiB (``None`` when not reported).
        driver: The driver version the tool reported for it, if per device.
    """

    name: str | None
    memory_mib: int | None
    driver: str | None = None


def parse_nvidia_csv(text: str) -> list[Device]:
    """GPUs from ``nvidia-smi --query-gpu=name,memory.total,driver_version`` CSV.

    Raises:
        ValueError: A line is not ``name, memory, driver``.
    """
    devices = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.rsplit(",", 2)]
        if len(parts) != 3 or not parts[0]:
            raise ValueError(f"nvidia-smi line {line.strip()!r} is not 'name, memory, driver'")
        name, memory, driver = parts
        try:
            memory_mib = int(float(memory))
        except ValueError:
            memory_mib = None  # "[N/A]": no dedicated memory (unified memory parts)
        devices.append(Device(name, memory_mib, driver if driver and "N/A" not in driver
                              else None))
    return devices


def parse_cuda_version(text: str) -> str | None:
    """The CUDA version in ``nvidia-smi --version`` or ``nvidia-smi`` output, else ``None``."""
    match = _CUDA.search(text)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class RocmReport:
    """What ``rocm-smi --json`` said: the cards, in card order, and the driver version."""

    devices: list[Device]
    driver: str | None


def _card_index(key: str) -> int:
    digits = key[4:]
    return int(digits) if digits.isdigit() else 1 << 30


def parse_rocm_json(text: str) -> RocmReport:
    """Cards and driver from ``rocm-smi ... --json``.

    Raises:
        ValueError: Not a JSON object of ``cardN`` objects.
    """
    start, end = text.find("{"), text.rfind("}")
    data: Any = json.loads(text[start:end + 1] if 0 <= start < end else text)  # warnings before
    if not isinstance(data, dict):
        raise ValueError("rocm-smi --json did not print a JSON object")
    devices = []
    for key in sorted((k for k in data if k.startswith("card")), key=_card_index):
        card = data[key]
        if not isinstance(card, dict):
            raise ValueError(f"rocm-smi --json: {key} is not an object")
        name = next((str(card[k]).strip() for k in ("Card Series", "Card series",
                                                      "Marketing Name") if card.get(k)), None)
        raw = card.get("VRAM Total Memory (B)")
        try:
            memory_mib = int(raw) // (1 << 20) if raw is not None else None
        except (TypeError, ValueError):
            memory_mib = None
        devices.append(Device(name, memory_mib))
    system = data.get("system")
    driver = None
    if isinstance(system, dict):
        value = system.get("Driver version")
        driver = str(value).strip() if value else None
    return RocmReport(devices, driver)


def parse_rocm_version(text: str) -> str | None:
    """The first line of ROCm's ``.info/version`` file (``6.1.2-119``), else ``None``."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return None


@dataclass(frozen=True, slots=True)
class NpuTable:
    """What ``npu-smi info`` said.

    Attributes:
        devices: One per chip row, named by its NPU's name row, HBM total in MiB.
        version: The header's ``Version:`` (the driver package), else ``None``.
    """

    devices: list[Device]
    version: str | None


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse_npu_table(text: str) -> NpuTable:
    """Chips and driver version from ``npu-smi info`` (see the module docstring)."""
    version = None
    devices: list[Device] = []
    name: str | None = None
    for line in text.splitlines():
        if "Process id" in line:
            break  # the process table follows the device table
        if version is None and "npu-smi" in line and (match := _NPU_VERSION.search(line)):
            version = match.group(1)
            continue
        if not line.strip().startswith("|"):
            continue
        cells = _cells(line)
        if len(cells) < 3:
            continue
        first = cells[0].split()
        if _BUS_ID.match(cells[1]):  # a chip row: chip id, bus id, usage
            pairs = _PAIR.findall(cells[2])
            devices.append(Device(name, int(pairs[-1][1]) if pairs else None))
        elif len(first) >= 2 and first[0].isdigit():  # an NPU row: id and name, health
            name = " ".join(first[1:])
    return NpuTable(devices, version)


def parse_cann_info(text: str) -> str | None:
    """``version=`` of CANN's ``ascend_toolkit_install.info``, else ``None``."""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "version" and value.strip():
            return value.strip()
    return None


_CPU_KEYS = ("model name", "Model", "Hardware", "cpu model", "cpu")


def parse_cpu_model(text: str) -> str | None:
    """The CPU's name from ``/proc/cpuinfo``: ``model name`` (x86), else ``Model``,
    ``Hardware``, ``cpu model``, ``cpu`` (other architectures), else the ARM implementer and
    part numbers as printed; ``None`` when it names none of them."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if sep and value and key not in found:
            found[key] = value
    for key in _CPU_KEYS:
        if key in found:
            return " ".join(found[key].split())
    if "CPU implementer" in found and "CPU part" in found:
        return f"ARM implementer {found['CPU implementer']} part {found['CPU part']}"
    return None


def parse_mem_total_mib(text: str) -> int | None:
    """``MemTotal`` of ``/proc/meminfo`` in MiB, else ``None``."""
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key.strip() == "MemTotal":
            parts = rest.split()
            if parts and parts[0].isdigit():
                unit = parts[1].lower() if len(parts) > 1 else "kb"
                scale = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}.get(unit, 1)
                return int(parts[0]) * scale // (1 << 20)
    return None
