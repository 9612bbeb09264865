"""``bench/gpu_profile.py``, the device call that profiles the kernels with ncu: its host-side
logic (the summary of ncu's CSV, the metric filter, the commands) runs without a GPU."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "bench", "gpu_profile.py")


def _load():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_profile", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_summary_of_a_made_up_ncu_csv():
    summ = _load().self_check()  # asserts the hand-computed values itself
    assert set(summ) == {"histogram_bounded_kernel", "search_kernel"}


def test_dry_run_profiles_both_histogram_kernels_and_xgboost(tmp_path):
    out = subprocess.run(
        [sys.executable, SCRIPT, "--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.count("--clock-control none") == 3
    assert "--hist-kernel bounded" in out and "--hist-kernel split_word" in out
    assert "regex:HistKernel" in out and "--step ab" in out


def test_kernel_families():
    fam = _load().kernel_family
    assert fam("cudapy::x::histogram_kernel[abi:v1](Array)") == "histogram_kernel"
    assert fam("cudapy::x::histogram_bounded_kernel[abi:v1]") == "histogram_bounded_kernel"
    assert (
        fam("void xgboost::tree::SharedMemHistKernel<true>(...)") == "xgboost:SharedMemHistKernel"
    )


def test_shell_wrapper_parses():
    subprocess.run(["bash", "-n", os.path.join(ROOT, "bench", "gpu_profile.sh")], check=True)
