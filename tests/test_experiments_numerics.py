"""The one numeric environment (experiments.numerics): the stages compute the same bytes on every x86-64 CPU type.

The slow test plays two machines on this one: what a CPU type changes is which kernels the libraries pick, and
each library has a switch for that (OpenBLAS's core type and thread count, numpy's SIMD targets, torch's ATen
capability). Machine A is an AVX-512 server with a threaded OpenBLAS, machine B an AVX2 machine. The features
stage (whose mel filterbank product and log10 differ between such kernels) and a few training steps of a model
that reads its output (Speech2Vec) must give the same bytes under both; with the pin switched off they differ,
which shows that the emulation is real and that the test failed before the pin.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from experiments import numerics

REPO_ROOT = Path(__file__).resolve().parents[1]

MACHINE_A = {"OPENBLAS_CORETYPE": "SkylakeX", "OPENBLAS_NUM_THREADS": "2", "ATEN_CPU_CAPABILITY": "avx512",
             "NPY_DISABLE_CPU_FEATURES": ""}
MACHINE_B = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "1", "ATEN_CPU_CAPABILITY": "avx2",
             "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}


def test_pin_sets_every_switch_and_overrides_the_shell():
    environ = {"OPENBLAS_CORETYPE": "SkylakeX", "PATH": "/bin"}
    if numerics.why_not_pinned(environ) is not None:
        pytest.skip(numerics.why_not_pinned(environ))
    assert numerics.pin_numerics(environ) == numerics.PINNED_ENVIRONMENT
    assert environ["OPENBLAS_CORETYPE"] == "Haswell" and environ["PATH"] == "/bin"
    assert all(environ[key] == value for key, value in numerics.PINNED_ENVIRONMENT.items())


def test_native_switch_keeps_the_machines_kernels():
    environ = {numerics.NATIVE_SWITCH: "1", "OPENBLAS_CORETYPE": "SkylakeX"}
    assert numerics.pin_numerics(environ) == {}
    assert environ["OPENBLAS_CORETYPE"] == "SkylakeX"
    assert "PUNCTUATION_NATIVE_NUMERICS" in numerics.why_not_pinned(environ)


def test_a_cpu_below_the_floor_is_not_pinned(monkeypatch):
    monkeypatch.setattr(numerics.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(numerics, "cpu_flags", lambda: {"sse2", "avx"})
    assert "lacks avx2" in numerics.why_not_pinned({})
    monkeypatch.setattr(numerics.platform, "machine", lambda: "aarch64")
    assert numerics.pin_numerics({}) == {}


def test_too_late_in_a_process_that_loaded_numpy():
    import numpy  # noqa: F401  (loaded: the kernels are chosen)

    before = dict(os.environ)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the pinned environment is in force here (tests/conftest.py): no warning
        assert numerics.pin_numerics() == {}
    assert dict(os.environ) == before


def test_a_stage_command_runs_pinned_and_records_it(tmp_path):
    """``python -m pipeline.X`` pins before numpy loads, whatever the shell says, and the facts show it."""
    code = ("import pipeline, json, numpy, torch\n"
            "from experiments.numerics import numeric_facts\n"
            "print(json.dumps(numeric_facts()))\n")
    env = {**os.environ, **MACHINE_A}
    env.pop(numerics.NATIVE_SWITCH, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True).stdout
    facts = json.loads(out.strip().splitlines()[-1])
    if facts.get("unpinned"):
        pytest.skip(facts["unpinned"])
    assert facts["floor"] == "x86-64-v3"
    assert facts["environment"] == numerics.PINNED_ENVIRONMENT
    assert facts["torch_cpu_capability"] == "AVX2"
    assert any("Haswell" in blas for blas in facts.get("blas", []))


# ------------------------------------------------------------------------------------------ too late; the regime


def _shell_without_the_pin() -> dict[str, str]:
    """This process's environment less every switch: a shell that pinned nothing."""
    return {key: value for key, value in os.environ.items()
            if key not in numerics.pinned_environment() and key != numerics.NATIVE_SWITCH}


def test_a_pin_after_numpy_warns_naming_it_unless_the_pinned_environment_was_inherited():
    if numerics.why_not_pinned({}) is not None:
        pytest.skip(numerics.why_not_pinned({}))
    code = "import numpy\nfrom experiments.numerics import pin_numerics\nprint(pin_numerics())"
    late = subprocess.run([sys.executable, "-c", code], env=_shell_without_the_pin(), cwd=REPO_ROOT,
                          capture_output=True, text=True, check=True)
    assert late.stdout.strip() == "{}"
    assert "RuntimeWarning: pin_numerics() comes too late: numpy already loaded" in late.stderr
    inherited = subprocess.run([sys.executable, "-c", code], env={**_shell_without_the_pin(),
                               **numerics.pinned_environment()}, cwd=REPO_ROOT, capture_output=True, text=True,
                               check=True)
    assert inherited.stdout.strip() == "{}" and "too late" not in inherited.stderr  # numpy loaded under the pin


def test_the_regime_is_the_floor_on_every_cpu_of_it_and_names_the_cpu_otherwise(monkeypatch):
    """The features' cache key holds the regime: pinned, the same on any CPU of the floor; native, the CPU's."""
    if numerics.why_not_pinned({}) is not None:
        pytest.skip(numerics.why_not_pinned({}))
    pinned = dict(numerics.pinned_environment())
    floor = numerics.AARCH64_FLOOR if numerics.is_aarch64() else numerics.FLOOR
    for model in ("AMD EPYC 9R14 96-Core Processor", "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"):
        monkeypatch.setattr(numerics, "cpu_model", lambda model=model: model)
        assert numerics.numeric_regime(pinned) == floor
    native = numerics.numeric_regime({**pinned, numerics.NATIVE_SWITCH: "1"})
    assert native.startswith("native:PUNCTUATION_NATIVE_NUMERICS is set; Intel(R) Xeon(R) Platinum 8375C")
    assert numerics.numeric_regime({"OPENBLAS_CORETYPE": "SkylakeX"}) == \
        "native:not pinned; Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz; OPENBLAS_CORETYPE=SkylakeX"
    facts = numerics.regime_facts()  # this process's: the tests run pinned (tests/conftest.py)
    assert facts == {"regime": floor, **pinned}


# ------------------------------------------------------------------------------------------ aarch64

#: /proc/cpuinfo of a Neoverse N1 (Graviton2) under Linux, one core of it
NEOVERSE_N1_CPUINFO = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x3
CPU part\t: 0xd0c
"""


@pytest.fixture
def linux_arm(monkeypatch, tmp_path):
    """This process seen as Linux on a Neoverse N1: its /proc/cpuinfo read from a file of the test."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(NEOVERSE_N1_CPUINFO)
    real_open = open
    monkeypatch.setattr(numerics, "open", lambda path, *a, **k: real_open(cpuinfo if path == "/proc/cpuinfo" else path,
                                                                          *a, **k), raising=False)
    monkeypatch.setattr(numerics.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(numerics.sys, "platform", "linux")
    monkeypatch.delenv(numerics.NATIVE_SWITCH, raising=False)
    return cpuinfo


def test_linux_on_aarch64_is_pinned_at_its_own_floor(linux_arm):
    assert "asimd" in numerics.cpu_features() and "fp" in numerics.cpu_features()
    assert numerics.why_not_pinned({}) is None
    environ = {"OPENBLAS_CORETYPE": "NEOVERSEN1", "PATH": "/bin"}
    assert numerics.pin_numerics(environ) == numerics.AARCH64_PINNED_ENVIRONMENT
    assert environ["OPENBLAS_CORETYPE"] == "ARMV8" and environ["ATEN_CPU_CAPABILITY"] == "default"
    assert environ["NPY_DISABLE_CPU_FEATURES"] == "ASIMDHP ASIMDDP ASIMDFHM SVE" and "MKL_CBWR" not in environ
    facts = numerics.numeric_facts()
    assert facts["floor"] == "armv8-a" != numerics.FLOOR and "unpinned" not in facts
    assert set(facts["environment"]) == set(numerics.AARCH64_PINNED_ENVIRONMENT)


def test_an_arm_cpu_off_the_floor_or_off_linux_is_not_pinned(linux_arm, monkeypatch):
    linux_arm.write_text(NEOVERSE_N1_CPUINFO.replace("fp asimd ", "fp "))
    assert "lacks asimd of the armv8-a floor" in numerics.why_not_pinned({})
    assert numerics.pin_numerics({}) == {}
    linux_arm.write_text(NEOVERSE_N1_CPUINFO)
    assert "PUNCTUATION_NATIVE_NUMERICS" in numerics.why_not_pinned({numerics.NATIVE_SWITCH: "1"})
    monkeypatch.setattr(numerics.platform, "machine", lambda: "arm64")
    monkeypatch.setattr(numerics.sys, "platform", "darwin")  # Apple silicon: Accelerate has no kernel switch
    assert "only Linux on aarch64 is pinned" in numerics.why_not_pinned({})
    environ: dict[str, str] = {}
    assert numerics.pin_numerics(environ) == {} and environ == {}
    facts = numerics.numeric_facts()
    assert facts["floor"] is None and "darwin" in facts["unpinned"]


def test_x86_64_keeps_its_own_switches(monkeypatch):
    monkeypatch.setattr(numerics.platform, "machine", lambda: "x86_64")
    assert numerics.pinned_environment() is numerics.PINNED_ENVIRONMENT
    monkeypatch.setattr(numerics.platform, "machine", lambda: "riscv64")
    assert "neither an x86-64 nor an aarch64 CPU (riscv64)" in numerics.why_not_pinned({})


def test_mkl_takes_the_avx2_branch_on_intel_cpus_only():
    assert numerics.mkl_branch({"MKL_CBWR": "AVX2,STRICT"}, "GenuineIntel") == "AVX2"
    assert numerics.mkl_branch({"MKL_CBWR": "AVX2,STRICT"}, "AuthenticAMD") == "AUTO"  # MKL ignores it there
    assert numerics.mkl_branch({"MKL_CBWR": "COMPATIBLE"}, "AuthenticAMD") == "COMPATIBLE"
    assert numerics.mkl_branch({}, "GenuineIntel") is None  # not pinned: nothing to say


_MKL_STEPS = """
import hashlib, torch
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True)
optimizer = torch.optim.Adam(layer.parameters(), 1e-3)
x = torch.randn(8, 50, 64)
for _ in range(5):
    optimizer.zero_grad(); layer(x).pow(2).mean().backward(); optimizer.step()
print(hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in layer.parameters())).hexdigest())
"""


def test_mkl_s_branch_is_what_this_cpu_computes_under_the_pin():
    """Five Adam steps of a Transformer layer under the pin with MKL_CBWR=AVX2 (the pin's) and AVX512: other
    weights on an Intel CPU, where MKL honours both (measured on an Intel Xeon); the same on an AMD CPU, where MKL
    takes AUTO whatever is asked (measured on an AMD EPYC). What :func:`numerics.mkl_branch` says, and why the
    committed bytes (AMD's) are not an Intel CPU's."""
    vendor = numerics.cpu_vendor()
    if vendor not in ("GenuineIntel", "AuthenticAMD") or not _has_avx512() or numerics.why_not_pinned({}) is not None:
        pytest.skip(f"needs an Intel or AMD CPU with AVX-512 at the floor ({vendor})")
    weights = {}
    for branch in ("AVX2,STRICT", "AVX512,STRICT"):
        env = {**os.environ, **numerics.PINNED_ENVIRONMENT, "MKL_CBWR": branch, "OMP_NUM_THREADS": "2"}
        weights[branch] = subprocess.run([sys.executable, "-c", _MKL_STEPS], env=env, capture_output=True, text=True,
                                         check=True, timeout=300).stdout.strip()
    honoured = weights["AVX2,STRICT"] != weights["AVX512,STRICT"]
    assert honoured == (numerics.mkl_branch({"MKL_CBWR": "AVX2,STRICT"}, vendor) == "AVX2"), (vendor, weights)


# ------------------------------------------------------------------------------------------ two machines


def _has_avx512() -> bool:
    flags = numerics.cpu_flags() or set()
    return "avx512f" in flags and numerics.why_not_pinned({}) is None


def _digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder``; the features report names its own output folder, which differs."""
    digests = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "features_report.json":
            report = json.loads(data)
            report.pop("out_dir", None)
            for value in report.values():
                if isinstance(value, dict):
                    value.pop("out_dir", None)
            data = json.dumps(report, sort_keys=True).encode()
        digests[path.relative_to(folder).as_posix()] = hashlib.sha256(data).hexdigest()
    return digests


TRAIN_STEPS = """
import pipeline, hashlib, sys
from embeddings.speech2vec import Speech2VecConfig, train_speech2vec
config = Speech2VecConfig(dim=8, encoder_hidden=16, decoder_hidden=16, min_count=1, subsample=0.0, epochs=2,
                          batch_size=8, threads=2, train_splits=("ref", "asr"))
train_speech2vec(sys.argv[1], sys.argv[2], sys.argv[3], config=config, embed_splits=("ref",))
"""


@pytest.fixture(scope="module")
def tiny_audio(tmp_path_factory):
    from audio.reference_speech import flite_available

    if not flite_available():
        pytest.skip("flite is not installed")
    from audio.align_stage import align_talks
    from audio.synthesize_stage import make_talk_audio
    from tests.test_audio_stage import ALIGN, audio_settings, write_tiny_corpus

    root = tmp_path_factory.mktemp("two_machines")
    prepared, iwslt = write_tiny_corpus(root)
    make_talk_audio(prepared, iwslt, root / "audio", **audio_settings())
    align_talks(root / "audio", prepared, root / "alignments", **ALIGN)
    return root, prepared


def _machine(root: Path, prepared: Path, name: str, machine: dict[str, str], *, native: bool) -> dict[str, str]:
    env = {**os.environ, **machine}
    env.pop(numerics.NATIVE_SWITCH, None)
    if native:
        env[numerics.NATIVE_SWITCH] = "1"
    out = root / name
    subprocess.run([sys.executable, "-m", "pipeline.features", "--params", str(root / "params.yaml"), "--quiet",
                    "--alignments", str(root / "alignments"), "--audio", str(root / "audio"),
                    "--prepared", str(prepared), "--out", str(out / "acoustic"),
                    "--metrics", str(out / "acoustic.json"), "--report", str(out / "audio_report.md")],
                   env=env, cwd=REPO_ROOT, check=True, capture_output=True)
    subprocess.run([sys.executable, "-c", TRAIN_STEPS, str(out / "acoustic"), str(prepared), str(out / "s2v")],
                   env=env, cwd=REPO_ROOT, check=True, capture_output=True)
    return {**{f"acoustic/{k}": v for k, v in _digest(out / "acoustic").items()},
            **{f"s2v/{k}": v for k, v in _digest(out / "s2v").items() if k.endswith((".txt", ".npy"))}}


@pytest.mark.slow
@pytest.mark.skipif(not _has_avx512(), reason="playing an AVX-512 machine needs an AVX-512 CPU")
def test_two_cpu_types_give_the_same_features_and_training(tiny_audio):
    import yaml

    root, prepared = tiny_audio
    params = {"profile": "tiny", "profiles": {"tiny": {}},
              "features": {"splits": ["ref", "asr", "dev"], "config": {}, "workers": 1, "scheduler": None}}
    (root / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")

    pinned_a = _machine(root, prepared, "pinned_a", MACHINE_A, native=False)
    pinned_b = _machine(root, prepared, "pinned_b", MACHINE_B, native=False)
    assert any(k.startswith("s2v/") for k in pinned_a) and any(k.endswith("mfcc.npy") for k in pinned_a)
    assert pinned_a == pinned_b

    native_a = _machine(root, prepared, "native_a", MACHINE_A, native=True)
    native_b = _machine(root, prepared, "native_b", MACHINE_B, native=True)
    differing = sorted(k for k in native_a if native_a[k] != native_b.get(k))
    assert any(k.endswith("mfcc.npy") for k in differing), differing  # the features stage itself
    assert any(k.startswith("s2v/") for k in differing), differing  # and what is trained from it
