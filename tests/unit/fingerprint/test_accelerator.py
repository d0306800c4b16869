"""probe_accelerator() with stand-in vendor tools on PATH: what each tool says becomes the
accelerator fields; a failing tool is unknown (never a guessed "cpu"); no tool is the CPU."""

from __future__ import annotations

import os
import platform
import shlex
import shutil
from pathlib import Path

import pytest

from tunegate.fingerprint import commands
from tunegate.fingerprint.accelerator import ACCELERATOR_FIELDS, probe_accelerator
from tunegate.fingerprint.fields import Field

NVIDIA_CSV = "NVIDIA H100 80GB HBM3, 81559, 550.54.15\n" * 2
NVIDIA_VERSION = ("NVIDIA-SMI version  : 550.54.15\nNVML version        : 550.54\n"
                  "DRIVER version      : 550.54.15\nCUDA Version        : 12.4\n")
NVIDIA_HEADER = ("| NVIDIA-SMI 525.85.12    Driver Version: 525.85.12    "
                 "CUDA Version: 12.0     |\n")
ROCM_JSON = ('{"card0": {"Card Series": "AMD Instinct MI300X OAM", '
             '"VRAM Total Memory (B)": "206141652992"}, "system": {"Driver version": "6.7.0"}}')
NPU_INFO = """\
| npu-smi 24.1.rc1                 Version: 24.1.rc1                                             |
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
| 0     910B1               | OK            | 89.1        32                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3437 / 65536         |
"""


def _tool(directory: Path, name: str, script: str) -> Path:
    """An executable ``name`` in ``directory`` running the shell ``script`` (builtins only:
    PATH holds nothing else)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


def _say(text: str) -> str:
    return f"printf '%s' {shlex.quote(text)}"


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH is this one empty directory: no real vendor tool is found."""
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", str(directory))
    return directory


def _values(fields: dict[str, Field]) -> dict[str, object]:
    return {name: fields[name].value for name in ACCELERATOR_FIELDS}


def test_nvidia_smi_gives_gpus_driver_and_cuda(bin_dir: Path) -> None:
    _tool(bin_dir, "nvidia-smi", f"""case "$1" in
  --version) {_say(NVIDIA_VERSION)} ;;
  --query-gpu=*) {_say(NVIDIA_CSV)} ;;
  *) exit 3 ;;
esac
""")
    fields = probe_accelerator()
    assert _values(fields) == {
        "accelerator.kind": "gpu", "accelerator.name": "NVIDIA H100 80GB HBM3",
        "accelerator.count": 2, "accelerator.memory_mib": 81559,
        "accelerator.driver": "550.54.15", "accelerator.runtime": "CUDA 12.4"}
    assert all(f.source == "measured" for f in fields.values())
    assert "nvidia-smi --version" in fields["accelerator.runtime"].how


def test_an_older_nvidia_smi_gives_cuda_from_its_header(bin_dir: Path) -> None:
    _tool(bin_dir, "nvidia-smi", f"""case "$1" in
  --version) echo "Unknown option: --version" >&2; exit 2 ;;
  --query-gpu=*) {_say("Tesla V100-SXM2-32GB, 32768, 525.85.12")} ;;
  *) {_say(NVIDIA_HEADER)} ;;
esac
""")
    fields = probe_accelerator()
    assert fields["accelerator.runtime"].value == "CUDA 12.0"
    assert fields["accelerator.count"].value == 1


def test_nvidia_smi_without_devices_falls_through_to_the_cpu(bin_dir: Path,
                                                            tmp_path: Path) -> None:
    _tool(bin_dir, "nvidia-smi", 'echo "No devices were found"; exit 6\n')
    assert probe_accelerator(dev=tmp_path)["accelerator.kind"].value == "cpu"


def test_a_failing_nvidia_smi_leaves_the_accelerator_unknown(bin_dir: Path) -> None:
    _tool(bin_dir, "nvidia-smi", 'echo "NVIDIA-SMI has failed because it couldn\'t '
          'communicate with the NVIDIA driver."; exit 9\n')
    fields = probe_accelerator()
    for name in ACCELERATOR_FIELDS:
        assert fields[name].source == "unknown", name
        assert "exited with status 9" in fields[name].how
        assert "couldn't communicate with the NVIDIA driver" in fields[name].how


def test_a_hanging_tool_is_stopped_and_reported(bin_dir: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    sleep = shutil.which("sleep", path="/usr/bin:/bin")
    assert sleep is not None
    _tool(bin_dir, "nvidia-smi", f"{sleep} 30 & {sleep} 30\n")  # a child holds its pipes too
    monkeypatch.setattr(commands, "DEFAULT_TIMEOUT_S", 0.3)
    fields = probe_accelerator()
    assert fields["accelerator.kind"].source == "unknown"
    assert "did not finish within 0.3 s" in fields["accelerator.kind"].how


def test_garbled_nvidia_output_is_unknown_not_a_crash(bin_dir: Path) -> None:
    _tool(bin_dir, "nvidia-smi", 'echo "garbage"\n')
    fields = probe_accelerator()
    assert fields["accelerator.name"].source == "unknown"
    assert "cannot read" in fields["accelerator.name"].how


def test_rocm_smi_gives_gpus_driver_and_the_rocm_release(tmp_path: Path, bin_dir: Path) -> None:
    rocm = tmp_path / "opt" / "rocm-6.1.2"
    tool = _tool(rocm / "bin", "rocm-smi", _say(ROCM_JSON) + "\n")
    (rocm / ".info").mkdir()
    (rocm / ".info" / "version").write_text("6.1.2-119\n")
    os.symlink(tool, bin_dir / "rocm-smi")  # as /opt/rocm/bin is usually reached
    assert _values(probe_accelerator()) == {
        "accelerator.kind": "gpu", "accelerator.name": "AMD Instinct MI300X OAM",
        "accelerator.count": 1, "accelerator.memory_mib": 196592,
        "accelerator.driver": "6.7.0", "accelerator.runtime": "ROCm 6.1.2-119"}


def test_npu_smi_gives_npus_driver_and_cann(tmp_path: Path, bin_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _tool(bin_dir, "npu-smi", '[ "$1" = info ] || exit 2\n' + _say(NPU_INFO) + "\n")
    toolkit = tmp_path / "Ascend" / "ascend-toolkit" / "latest"
    info = toolkit / f"{platform.machine()}-linux" / "ascend_toolkit_install.info"
    info.parent.mkdir(parents=True)
    info.write_text("package_name=Ascend-cann-toolkit\nversion=8.0.RC2\n")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(toolkit))
    assert _values(probe_accelerator()) == {
        "accelerator.kind": "npu", "accelerator.name": "910B1",
        "accelerator.count": 1, "accelerator.memory_mib": 65536,
        "accelerator.driver": "24.1.rc1", "accelerator.runtime": "CANN 8.0.RC2"}


@pytest.mark.parametrize("node", ["nvidiactl", "kfd", "davinci0"])
def test_a_device_file_no_vendor_tool_describes_is_unknown_not_a_cpu(
        bin_dir: Path, tmp_path: Path, node: str) -> None:
    (tmp_path / node).touch()
    fields = probe_accelerator(dev=tmp_path)
    assert {f.source for f in fields.values()} == {"unknown"}
    assert f"{tmp_path / node} exists" in fields["accelerator.kind"].how


def test_without_vendor_tools_the_accelerator_is_the_cpu(bin_dir: Path, tmp_path: Path) -> None:
    fields = probe_accelerator(dev=tmp_path)
    assert fields["accelerator.kind"].value == "cpu"
    assert fields["accelerator.count"].value == 1
    assert fields["accelerator.name"].known
    if Path("/proc/meminfo").is_file():
        assert isinstance(fields["accelerator.memory_mib"].value, int)
        assert fields["accelerator.memory_mib"].value > 0
    for name in ("accelerator.driver", "accelerator.runtime"):
        assert (fields[name].value, fields[name].source) == (None, "measured")
        assert "CPU" in fields[name].how
