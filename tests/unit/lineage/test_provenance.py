"""What a provenance record says about the CPU (:func:`cdgtmll.lineage.provenance.cpu_model`)."""

from __future__ import annotations

import torch

from cdgtmll.lineage import provenance

# /proc/cpuinfo as Linux writes it (x86): one block per logical CPU, "key<TAB>: value", a blank line after each
INTEL_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
flags\t\t: fpu vme avx2 avx512f
power management:

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7763 64-Core Processor
stepping\t: 1

"""

# aarch64: no vendor_id, no model name
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 243.75
CPU implementer\t: 0x41
CPU architecture: 8
CPU part\t: 0xd0c

"""


def test_cpu_model_reads_the_first_processor(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text(INTEL_CPUINFO)
    assert provenance.cpu_model(f) == {"vendor": "GenuineIntel", "model": "Intel(R) Xeon(R) Platinum 8480+",
                                       "family_model_stepping": "6/143/8"}


def test_cpu_model_without_vendor_fields(tmp_path, monkeypatch):
    f = tmp_path / "cpuinfo"
    f.write_text(ARM_CPUINFO)
    monkeypatch.setattr(provenance.platform, "processor", lambda: "")
    assert provenance.cpu_model(f) == {"vendor": None, "model": None, "family_model_stepping": None}
    monkeypatch.setattr(provenance.platform, "processor", lambda: "arm")
    assert provenance.cpu_model(tmp_path / "missing")["model"] == "arm"


def test_device_info_names_the_cpu_and_torch_kernels():
    info = provenance.device_info("cpu")
    assert info["cpu"]["vendor"] == provenance.cpu_model()["vendor"]
    # torch is imported here, so the record says which kernels it dispatches to
    assert info["cpu"]["torch_capability"] == torch.backends.cpu.get_cpu_capability()
    assert info["cpu"]["torch_mkl"] is torch.backends.mkl.is_available()


def test_device_kind_is_the_machine_not_the_process():
    cpu = {"vendor": "AuthenticAMD", "model": "AMD EPYC", "family_model_stepping": "26/2/1"}
    # a process that loaded torch records more of the CPU than one that did not: the same machine
    with_torch = {"requested": "cpu", "cpu": {**cpu, "torch_capability": "AVX512", "torch_mkl": True},
                  "torch_threads": 4, "cuda_available": True, "cuda_device": "NVIDIA H100 80GB HBM3"}
    assert provenance.device_kind(with_torch) == provenance.device_kind({"requested": "cpu", "cpu": cpu}) \
        == "AMD EPYC (26/2/1)"
    assert provenance.device_kind({**with_torch, "requested": "cuda"}) == "AMD EPYC (26/2/1) + NVIDIA H100 80GB HBM3"
    assert provenance.device_kind({"requested": "cpu", "cpu": {"vendor": "ARM", "model": None}}) == "ARM"
    assert provenance.device_kind({"requested": "cpu", "platform": "Linux"}) is None  # recorded before the CPU was
    assert provenance.device_kind(None) is None
