"""benchmarks/machine.py: the machine a timing names, so that wall times are compared only on one machine."""

from __future__ import annotations

from benchmarks import machine


def test_the_machine_of_a_timing_names_the_cpu_its_cores_and_whether_it_has_avx512(monkeypatch):
    monkeypatch.setattr(machine, "cpu_model", lambda: "AMD EPYC")
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(machine, "cpu_flags", lambda: {"avx2", "avx512f"})
    assert machine.this_machine() == "AMD EPYC, 2 cores, AVX-512"
    monkeypatch.setattr(machine, "cpu_flags", lambda: {"avx2"})
    assert machine.this_machine() == "AMD EPYC, 2 cores, no AVX-512"
    monkeypatch.setattr(machine, "cpu_flags", lambda: None)  # no /proc/cpuinfo: AVX-512 not claimed
    assert machine.this_machine() == "AMD EPYC, 2 cores, no AVX-512"
