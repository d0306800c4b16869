"""The vendor tools' and the kernel's output, as they really print it, parsed exactly."""

from __future__ import annotations

import pytest

from tunegate.fingerprint.smi import (
    Device,
    parse_cann_info,
    parse_cpu_model,
    parse_cuda_version,
    parse_mem_total_mib,
    parse_npu_table,
    parse_nvidia_csv,
    parse_rocm_json,
    parse_rocm_version,
)

# nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader,nounits
NVIDIA_CSV_H100 = """\
NVIDIA H100 80GB HBM3, 81559, 550.54.15
NVIDIA H100 80GB HBM3, 81559, 550.54.15
"""
# A unified-memory part (GB10) reports no dedicated memory.
NVIDIA_CSV_GB10 = "NVIDIA GB10, [N/A], 580.142\n"

# nvidia-smi --version (drivers from the 535 series on)
NVIDIA_VERSION = """\
NVIDIA-SMI version  : 550.54.15
NVML version        : 550.54
DRIVER version      : 550.54.15
CUDA Version        : 12.4
"""
# plain nvidia-smi: the header line carries it on every driver
NVIDIA_HEADER = """\
Tue Jun  4 10:12:01 2024
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.127.05             Driver Version: 550.127.05     CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|   0  NVIDIA A40                     On  |   00000000:4F:00.0 Off |                    0 |
"""

# rocm-smi --showproductname --showmeminfo vram --showdriverversion --json (rocm_smi.py writes
# each printLog line as "key: value" into JSON_DATA["cardN"], printSysLog into "system")
ROCM_JSON = """\
{"card0": {"Card Series": "AMD Instinct MI300X OAM", "Card Model": "0x74a1", \
"Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]", "Card SKU": "M3000100", \
"Subsystem ID": "0x74a1", "Device Rev": "0x00", "Node ID": "2", "GUID": "28851", \
"GFX Version": "gfx942", "VRAM Total Memory (B)": "206141652992", \
"VRAM Total Used Memory (B)": "297553920"}, \
"card1": {"Card Series": "AMD Instinct MI300X OAM", "Card Model": "0x74a1", \
"VRAM Total Memory (B)": "206141652992", "VRAM Total Used Memory (B)": "297553920"}, \
"system": {"Driver version": "6.7.0"}}
"""

# npu-smi info on an Atlas 800T A2 (910B3), with the process table after the devices
NPU_INFO = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 24.1.rc1.b030            Version: 24.1.rc1.b030                                        |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 101.8       43                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3318 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | OK            | 92.0        39                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          59351/ 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| 1       0                 | 1712733       | sglangschedul            | 48954                   |
+===========================+===============+====================================================+
"""

CANN_INFO = """\
package_name=Ascend-cann-toolkit
version=8.0.RC2
innerversion=V100R001C19SPC001B140
compatible_version=[V100R001C15],[V100R001C17],[V100R001C18],[V100R001C19]
arch=aarch64
os=linux
path=/usr/local/Ascend/ascend-toolkit/8.0.RC2/aarch64-linux
"""

CPUINFO_X86 = """\
processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9654 96-Core Processor
stepping\t: 1

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9654 96-Core Processor
"""
# aarch64 kernels print no model name: only the implementer and part numbers.
CPUINFO_ARM = """\
processor\t: 0
BogoMIPS\t: 2000.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd0c
CPU revision\t: 1
"""
MEMINFO = """\
MemTotal:       1056374752 kB
MemFree:        1003217632 kB
MemAvailable:   1037890940 kB
"""


def test_nvidia_csv_gives_one_device_per_gpu_line() -> None:
    assert parse_nvidia_csv(NVIDIA_CSV_H100) == [
        Device("NVIDIA H100 80GB HBM3", 81559, "550.54.15")] * 2


def test_nvidia_csv_without_dedicated_memory_leaves_memory_unknown() -> None:
    assert parse_nvidia_csv(NVIDIA_CSV_GB10) == [Device("NVIDIA GB10", None, "580.142")]


def test_nvidia_csv_refuses_a_line_it_cannot_split() -> None:
    with pytest.raises(ValueError, match="'garbage' is not 'name, memory, driver'"):
        parse_nvidia_csv("garbage\n")


@pytest.mark.parametrize("text", [NVIDIA_VERSION, NVIDIA_HEADER])
def test_cuda_version_from_version_output_or_header(text: str) -> None:
    assert parse_cuda_version(text) == "12.4"


def test_no_cuda_version_in_unrelated_text() -> None:
    assert parse_cuda_version("NVIDIA-SMI has failed because it couldn't communicate") is None


def test_rocm_json_gives_cards_in_order_and_the_driver() -> None:
    report = parse_rocm_json(ROCM_JSON)
    assert report.devices == [Device("AMD Instinct MI300X OAM", 196592)] * 2
    assert report.driver == "6.7.0"


def test_rocm_json_reads_older_key_spelling_and_skips_leading_warnings() -> None:
    text = ('WARNING: AMD GPU device(s) is/are in a low-power state\n'
            '{"card0": {"Card series": "Radeon RX 7900 XTX", '
            '"VRAM Total Memory (B)": "25753026560"}}')
    report = parse_rocm_json(text)
    assert report.devices == [Device("Radeon RX 7900 XTX", 24560)]
    assert report.driver is None


def test_rocm_json_refuses_what_is_not_json() -> None:
    with pytest.raises(ValueError):
        parse_rocm_json("rocm-smi: command failed")


def test_rocm_release_file_first_line() -> None:
    assert parse_rocm_version("6.1.2-119\n") == "6.1.2-119"
    assert parse_rocm_version("\n") is None


def test_npu_table_gives_each_chip_with_its_npu_name_and_hbm_total() -> None:
    table = parse_npu_table(NPU_INFO)
    assert table.devices == [Device("910B3", 65536), Device("910B3", 65536)]
    assert table.version == "24.1.rc1.b030"


def test_npu_table_without_devices_is_empty() -> None:
    assert parse_npu_table("npu-smi: no device found\n").devices == []


def test_cann_version_from_toolkit_install_info() -> None:
    assert parse_cann_info(CANN_INFO) == "8.0.RC2"
    assert parse_cann_info("arch=aarch64\n") is None


def test_cpu_model_on_x86_and_arm() -> None:
    assert parse_cpu_model(CPUINFO_X86) == "AMD EPYC 9654 96-Core Processor"
    assert parse_cpu_model(CPUINFO_ARM) == "ARM implementer 0x41 part 0xd0c"
    assert parse_cpu_model("processor\t: 0\n") is None


def test_total_memory_in_mib() -> None:
    assert parse_mem_total_mib(MEMINFO) == 1056374752 // 1024
    assert parse_mem_total_mib("MemFree: 1 kB\n") is None
