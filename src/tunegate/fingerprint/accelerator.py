"""The ``accelerator.*`` fields of this machine: NVIDIA, AMD or Ascend tools, else the CPU.

Order: ``nvidia-smi``, ``rocm-smi``, ``npu-smi``, each looked up on ``PATH`` and run with a
deadline of a few seconds (:mod:`.commands`). A tool that lists devices decides the fields; one
that runs and lists none (a driver without devices) passes to the next; one that is there but
fails makes the fields unknown with its error: a GPU may well be present, so claiming "cpu"
would be a guess. With no tool at all, the accelerator is the CPU: its model from
``/proc/cpuinfo``, count 1, memory the machine's RAM from ``/proc/meminfo``, and no driver or
runtime (``null``, measured: not applicable).

Runtimes: NVIDIA's is the CUDA version the driver supports (``nvidia-smi --version``, else the
plain ``nvidia-smi`` header), AMD's the ROCm release in ``<rocm>/.info/version`` next to
``rocm-smi``, Ascend's the CANN toolkit's ``ascend_toolkit_install.info``. Several devices of
different names are joined with ``" + "``; memory is per device (the smallest when they differ,
and ``how`` says so).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from pathlib import Path

from tunegate.fingerprint.commands import ToolRun, find_tool, read_text, run_tool
from tunegate.fingerprint.fields import Field, measured, not_applicable, unknown
from tunegate.fingerprint.host import cpu_model
from tunegate.fingerprint.smi import (
    Device,
    parse_cann_info,
    parse_cuda_version,
    parse_mem_total_mib,
    parse_npu_table,
    parse_nvidia_csv,
    parse_rocm_json,
    parse_rocm_version,
)

__all__ = ["ACCELERATOR_FIELDS", "probe_accelerator"]

ACCELERATOR_FIELDS = ("accelerator.kind", "accelerator.name", "accelerator.count",
                      "accelerator.memory_mib", "accelerator.driver", "accelerator.runtime")

_NVIDIA_QUERY = ("--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits")
_ROCM_QUERY = ("--showproductname", "--showmeminfo", "vram", "--showdriverversion", "--json")
_CANN_ROOTS = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/cann")
_NO_DEVICES = ("no devices were found", "no device found", "no npu", "not found any device")


def _all_unknown(why: str) -> dict[str, Field]:
    return {name: unknown(why) for name in ACCELERATOR_FIELDS}


def _no_devices(run: ToolRun) -> bool:
    said = (run.stdout + run.stderr).lower()
    return any(phrase in said for phrase in _NO_DEVICES)


def _devices_fields(kind: str, devices: Sequence[Device], tool: str) -> dict[str, Field]:
    names = list(dict.fromkeys(d.name for d in devices if d.name))
    if names and all(d.name for d in devices):
        name = measured(" + ".join(names), tool)
    else:
        name = unknown(f"{tool} gave no name for a device")
    memories = [d.memory_mib for d in devices]
    if all(m is not None for m in memories):
        sizes = sorted({m for m in memories if m is not None})
        how = tool if len(sizes) == 1 else f"{tool}: devices differ ({sizes} MiB), the smallest"
        memory = measured(sizes[0], how)
    else:
        memory = unknown(f"{tool} reported no memory size for a device")
    return {"accelerator.kind": measured(kind, f"{tool} lists {len(devices)} device(s)"),
            "accelerator.name": name,
            "accelerator.count": measured(len(devices), f"{tool} lists {len(devices)}"),
            "accelerator.memory_mib": memory}


def _nvidia(path: str) -> dict[str, Field] | None:
    run = run_tool([path, *_NVIDIA_QUERY])
    if not run.ok:
        return None if _no_devices(run) else _all_unknown(run.error or run.command)
    try:
        devices = parse_nvidia_csv(run.stdout)
    except ValueError as exc:
        return _all_unknown(f"nvidia-smi printed what tunegate cannot read: {exc}")
    if not devices:
        return None
    fields = _devices_fields("gpu", devices, "nvidia-smi --query-gpu")
    drivers = list(dict.fromkeys(d.driver for d in devices if d.driver))
    fields["accelerator.driver"] = (measured(drivers[0], "nvidia-smi --query-gpu driver_version")
                                    if len(drivers) == 1 else
                                    unknown(f"nvidia-smi reported drivers {drivers}"))
    cuda = None
    for argv in ([path, "--version"], [path]):  # --version is newer; the header is older
        answer = run_tool(argv)
        cuda = parse_cuda_version(answer.stdout) if answer.ok else None
        if cuda is not None:
            source = f"`{answer.command}`: the CUDA version the driver supports"
            fields["accelerator.runtime"] = measured(f"CUDA {cuda}", source)
            break
    if cuda is None:
        fields["accelerator.runtime"] = unknown("neither `nvidia-smi --version` nor "
                                                "`nvidia-smi` printed a CUDA version")
    return fields


def _rocm_release(path: str) -> Field:
    candidates = [Path(os.path.realpath(path)).parent.parent / ".info" / "version",
                  Path("/opt/rocm/.info/version")]
    for candidate in candidates:
        text = read_text(candidate)
        version = parse_rocm_version(text) if text else None
        if version:
            return measured(f"ROCm {version}", str(candidate))
    return unknown(f"no ROCm release file ({', '.join(str(c) for c in candidates)})")


def _rocm(path: str) -> dict[str, Field] | None:
    run = run_tool([path, *_ROCM_QUERY])
    if not run.ok:
        return None if _no_devices(run) else _all_unknown(run.error or run.command)
    try:
        report = parse_rocm_json(run.stdout)
    except ValueError as exc:
        return _all_unknown(f"rocm-smi printed what tunegate cannot read: {exc}")
    if not report.devices:
        return None
    fields = _devices_fields("gpu", report.devices, "rocm-smi --json")
    fields["accelerator.driver"] = (measured(report.driver, "rocm-smi --showdriverversion")
                                    if report.driver else
                                    unknown("rocm-smi --showdriverversion printed no version"))
    fields["accelerator.runtime"] = _rocm_release(path)
    return fields


def _cann_release() -> Field:
    roots = [r for r in (os.environ.get("ASCEND_HOME_PATH"),
                         os.environ.get("ASCEND_TOOLKIT_HOME")) if r] + list(_CANN_ROOTS)
    arch = platform.machine()
    for root in roots:
        path = Path(root) / f"{arch}-linux" / "ascend_toolkit_install.info"
        text = read_text(path)
        version = parse_cann_info(text) if text else None
        if version:
            return measured(f"CANN {version}", str(path))
    return unknown(f"no CANN toolkit install info under {', '.join(roots)}")


def _ascend(path: str) -> dict[str, Field] | None:
    run = run_tool([path, "info"])
    if not run.ok:
        return None if _no_devices(run) else _all_unknown(run.error or run.command)
    table = parse_npu_table(run.stdout)
    if not table.devices:
        return None
    fields = _devices_fields("npu", table.devices, "npu-smi info")
    fields["accelerator.driver"] = (measured(table.version, "npu-smi info header Version")
                                    if table.version else
                                    unknown("npu-smi info printed no Version"))
    fields["accelerator.runtime"] = _cann_release()
    return fields


def _cpu() -> dict[str, Field]:
    meminfo = read_text("/proc/meminfo")
    ram = parse_mem_total_mib(meminfo) if meminfo else None
    tools = "no nvidia-smi, rocm-smi or npu-smi lists a device"
    return {"accelerator.kind": measured("cpu", tools),
            "accelerator.name": cpu_model(),
            "accelerator.count": measured(1, "the CPU"),
            "accelerator.memory_mib": (measured(ram, "MemTotal of /proc/meminfo") if ram
                                       else unknown("/proc/meminfo gives no MemTotal")),
            "accelerator.driver": not_applicable("a CPU has no accelerator driver"),
            "accelerator.runtime": not_applicable("a CPU has no accelerator runtime")}


DEVICE_NODES = ("nvidiactl", "nvidia0", "kfd", "davinci0", "davinci_manager", "accel0")
"""Device files of NVIDIA, AMD (ROCm), Ascend and other accelerator drivers under ``/dev``."""


def _device_node(dev: Path) -> Path | None:
    """An accelerator's device file, when one exists: a machine with one is not a CPU host,
    even when no vendor tool is installed to say what it is."""
    return next((dev / name for name in DEVICE_NODES if (dev / name).exists()), None)


def probe_accelerator(dev: Path = Path("/dev")) -> dict[str, Field]:
    """The ``accelerator.*`` fields of this machine (module docstring); never raises.

    ``dev``: where device files are looked for (tests give another directory).
    """
    for tool, probe in (("nvidia-smi", _nvidia), ("rocm-smi", _rocm), ("npu-smi", _ascend)):
        path = find_tool(tool)
        if path is not None:
            fields = probe(path)
            if fields is not None:
                return fields
    node = _device_node(dev)
    if node is not None:  # an accelerator no tool describes: unknown, never guessed "cpu"
        return _all_unknown(f"{node} exists but no nvidia-smi, rocm-smi or npu-smi lists a "
                            "device; install the vendor's tool")
    return _cpu()
