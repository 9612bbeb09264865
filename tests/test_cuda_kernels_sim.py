"""The CUDA kernels without a GPU: the simulator suite and the real compiler.

* ``test_simulator_suite`` runs ``tests/_cudasim_kernels.py`` in its own pytest process with
  ``NUMBA_ENABLE_CUDASIM=1`` (the variable must be set before numba is imported, so it cannot
  share this process): every kernel and the whole grower / booster against the CPU backend,
  and the per-tree transfer and launch budget.
* ``test_kernels_compile_to_sass`` compiles every kernel with the real compiler for Ampere
  (sm_80) and Hopper (sm_90) -- NVVM to PTX, ptxas to SASS; the test extra installs them as
  wheels, no GPU needed -- and checks what the hardware will run: no spills, registers under
  a stated bound and, at each kernel's largest block, within a block's 65,536 (shared memory
  within 48 KiB), no 64-bit shared-memory compare-and-swap loops, native 32-bit shared
  atomics in the histogram; in the PTX, no float64 fused multiply-add in the split search
  (it would round differently from the CPU) and the objectives' explicit ``add.rn`` /
  ``mul.rn`` arithmetic (``gpufs.rules._exactmath``).
"""

import os
import re
import shutil
import subprocess
import tempfile

import pytest

import _background_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")


@pytest.mark.cudasim
def test_simulator_suite():
    code, out = _background_files.result("_cudasim_kernels.py")
    tail = out[-6000:]
    print(tail)
    assert code == 0, f"simulator suite failed:\n{tail}"
    last = out.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", last) and "failed" not in last, tail


def _toolchain():
    """numba.cuda's compiler, ptxas and nvdisasm (the ``nvidia-cuda-nvcc`` and
    ``nvidia-cuda-nvdisasm`` wheels of the test extra, or a CUDA toolkit on PATH), or skip."""
    from numba import cuda

    def probe(a):
        a[0] = 1

    try:
        cuda.compile_ptx(probe, "void(int64[:])", cc=(9, 0))
    except Exception as e:  # no NVVM library here
        pytest.skip(f"CUDA compiler libraries not installed ({type(e).__name__})")
    tools = {}
    for tool in ("ptxas", "nvdisasm"):
        # The wheels' tools first: they match the NVVM that wrote the PTX (an older toolkit
        # on PATH rejects a newer PTX version).
        path = None
        try:
            import nvidia.cu13 as wheels

            for d in wheels.__path__:
                cand = os.path.join(d, "bin", tool)
                if os.path.exists(cand):
                    path = cand
        except ImportError:
            pass
        path = path or shutil.which(tool)
        if path is None:
            pytest.skip(f"{tool} not installed (pip install nvidia-cuda-nvcc nvidia-cuda-nvdisasm)")
        tools[tool] = path
    return cuda, tools


def _kernel_signatures():
    from numba import types as T

    def A(dt, nd, layout="C"):
        return T.Array(dt, nd, layout)

    f64, i64, i32, u8, b1, f32 = T.float64, T.int64, T.int32, T.uint8, T.boolean, T.float32
    u32 = T.uint32
    g1 = (A(f64, 1), A(f64, 1), A(f64, 1))  # g, h, w
    return {
        "bin_transform_kernel": [
            (A(f32, 2, "A"), A(f64, 2), A(u8, 2)),
            (A(f64, 2), A(f64, 2), A(u8, 2)),
        ],
        "histogram_kernel": [
            (
                A(u8, 2),
                A(i64, 2),
                A(i32, 2),
                i64,
                b1,
                A(i64, 2),
                A(i64, 1),
                A(u8, 2),
                i64,
                A(i64, 1),
                A(i64, 1),
                i64,
                A(i64, 3),
            )
        ],
        "histogram_bounded_kernel": [
            (
                A(u8, 2),
                A(i64, 2),
                A(i32, 2),
                i64,
                b1,
                A(i64, 2),
                A(i64, 1),
                A(u8, 2),
                i64,
                A(i64, 1),
                A(i64, 1),
                i64,
                A(i64, 3),
            )
        ],
        "search_kernel": [
            (
                A(i64, 3),
                A(i64, 3),
                A(i64, 2),
                b1,
                A(i64, 2),
                A(i64, 1),
                i64,
                A(i32, 2),
                i64,
                A(i64, 1),
                A(i64, 1),
                A(i32, 1),
                A(f64, 1),
                A(b1, 1),
                A(b1, 1),
                A(f64, 1),
                A(i32, 1),
                A(u8, 3),
                A(f64, 3),
                A(i64, 3),
                b1,
                A(u8, 2),
                A(i64, 1),
                A(b1, 1),
                i64,
                A(f64, 2),
                A(i64, 2),
                A(i64, 2),
                A(i64, 1),
                A(f64, 1),
            )
        ],
        "partition_count_kernel": [
            (
                A(u8, 2),
                A(i32, 2),
                i64,
                b1,
                A(i64, 2),
                A(i64, 1),
                i64,
                A(i64, 1),
                A(i64, 1),
                A(i64, 2),
                A(i64, 2),
                A(i64, 1),
                i64,
            )
        ],
        "partition_scatter_kernel": [
            (A(u8, 2), A(i32, 2), i64, b1, A(i64, 2), A(i64, 1), i64, A(i64, 1), A(i64, 2))
        ],
        "update_leaves_kernel": [(A(f64, 1, "A"), A(i32, 2), b1, A(i64, 2), A(i64, 1), A(f64, 1))],
        "predict_binned_kernel": [
            (
                A(u8, 2),
                A(i32, 2),
                A(u8, 2),
                A(b1, 2),
                A(f64, 2),
                A(i32, 1),
                A(f64, 2),
                A(b1, 1),
                A(u32, 3),
            )
        ],
        "predict_raw_kernel": [
            (
                A(f32, 2, "A"),
                A(i32, 2),
                A(f64, 2),
                A(b1, 2),
                A(f64, 2),
                A(i32, 1),
                A(f64, 2),
                A(b1, 1),
                A(u32, 3),
            )
        ],
        "logistic_gradients_kernel": [
            (A(f64, 2), A(i32, 1), A(f64, 2), A(f64, 2)),
            (A(f64, 2), A(f64, 1), A(f64, 2), A(f64, 2)),
        ],
        "softmax_gradients_kernel": [(A(f64, 2), A(i32, 1), A(f64, 2), A(f64, 2))],
        "squared_error_loss_kernel": [(A(f64, 2), A(f64, 1), A(f64, 1))],
        "logistic_loss_kernel": [(A(f64, 2), A(i32, 1), A(f64, 1))],
        "softmax_loss_kernel": [(A(f64, 2), A(i32, 1), A(f64, 1))],
        "round_squared_error_kernel": [(A(f64, 2), A(f64, 1), A(f64, 2), A(f64, 2), A(f64, 1))],
        "round_logistic_kernel": [(A(f64, 2), A(i32, 1), A(f64, 2), A(f64, 2), A(f64, 1))],
        "round_softmax_kernel": [(A(f64, 2), A(i32, 1), A(f64, 2), A(f64, 2), A(f64, 1))],
        "extremes_kernel": [g1 + (b1, b1, A(f64, 2))],
        "quantize_kernel": [g1 + (b1,) + (f64,) * 11 + (b1, A(i64, 2), A(i64, 2))],
    }


#: Registers per thread each kernel must stay under (ptxas -v, sm_80 and sm_90; measured
#: with numba-cuda 0.30 and CUDA 13.5, before search / decide and count / plan were fused:
#: histogram 48-54, search 94-96, decide 79-94, the rest 20-58). 64 keeps four 256-thread
#: blocks per SM within its 65,536 registers. The split search (``_gain``'s whole bin scan
#: inlined in one thread, then the decision in its last block) and the partition's count
#: (then the plan in its last block) get 128: the search runs 128-thread blocks, the count
#: at most 512 (``check_block_resources`` checks the product).
REGISTER_BOUND = {"search_kernel": 128, "partition_count_kernel": 128}
REGISTER_BOUND_DEFAULT = 64
#: Registers a block may hold on every GPU gpufs targets (sm_70 to sm_90), and the unit they
#: are allocated in per thread (256 per warp: 8 per thread).
REGISTERS_PER_BLOCK = 65536
REGISTER_UNIT = 8
#: Shared memory per block without opting in (static + dynamic).
SHARED_PER_BLOCK = 48 * 1024


def check_block_resources(name, log, what):
    """What only hardware refuses ("too many resources requested for launch"): the kernel's
    largest block (``gpu.KERNEL_MAX_THREADS``) times its registers per thread (rounded up to
    the allocation unit) within a block's 65,536 registers, and its static shared memory
    (ptxas' report) plus its largest dynamic shared memory within 48 KiB."""
    from gpufs.backends.gpu.backend import KERNEL_MAX_DYNAMIC_SHARED, KERNEL_MAX_THREADS

    threads = KERNEL_MAX_THREADS[name]
    regs = int(re.search(r"Used (\d+) registers", log).group(1))
    alloc = -(-regs // REGISTER_UNIT) * REGISTER_UNIT
    assert alloc * threads <= REGISTERS_PER_BLOCK, (
        f"{what}: {threads} threads x {alloc} registers > {REGISTERS_PER_BLOCK}"
    )
    smem = re.search(r"(\d+) bytes smem", log)
    static = int(smem.group(1)) if smem else 0
    dynamic = KERNEL_MAX_DYNAMIC_SHARED.get(name, 0)
    assert static + dynamic <= SHARED_PER_BLOCK, (
        f"{what}: {static} B static + {dynamic} B dynamic shared memory > {SHARED_PER_BLOCK}"
    )
    if name in HISTOGRAM_KERNELS:  # ``hist_optin_shared`` sizes tiles to the whole opt-in
        assert static == 0, f"{what}: {static} B static shared memory"


def compile_kernels(ccs):
    """{(kernel, variant, cc): (ptx, ptxas -v log, SASS)} for each compute capability of
    ``ccs`` (SASS only for kernels with shared-memory atomics, None for the others). NVVM writes
    PTX once, for the lowest (PTX is forward compatible: ptxas
    assembles it for each newer architecture), which halves the test's compile time."""
    cuda, tools = _toolchain()
    from gpufs.backends.gpu.backend import _load_kernels

    k = _load_kernels()
    sigs = _kernel_signatures()
    assert set(sigs) == {n for n in k.__all__ if n.endswith("_kernel")}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, variants in sigs.items():
            for v, sig in enumerate(variants):
                ptx, _ = cuda.compile_ptx(getattr(k, name).py_func, sig, cc=min(ccs))
                src = os.path.join(tmp, f"{name}{v}.ptx")
                with open(src, "w") as fh:
                    fh.write(ptx)
                for cc in ccs:
                    cubin = os.path.join(tmp, f"{name}{v}_{cc[0]}{cc[1]}.cubin")
                    log = subprocess.run(
                        [tools["ptxas"], f"-arch=sm_{cc[0]}{cc[1]}", "-v", src, "-o", cubin],
                        capture_output=True,
                        text=True,
                    )
                    assert log.returncode == 0, f"ptxas failed on {name}:\n{log.stderr}"
                    sass = None
                    if "atom.shared" in ptx:  # disassembling takes ~0.5 s: only where needed
                        sass = subprocess.run(
                            [tools["nvdisasm"], "-c", cubin],
                            capture_output=True,
                            text=True,
                            check=True,
                        ).stdout
                    out[name, v, cc] = (ptx, log.stdout + log.stderr, sass)
    return out


@pytest.fixture
def hopper(monkeypatch):
    """Device functions are compiled for the current device's compute capability; there is
    no device here, so name one (the kernels are compiled for the cc each test asks)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("compiling needs the real numba.cuda, not the simulator")
    import numba.cuda.dispatcher as dispatcher

    class _Hopper:
        compute_capability = (9, 0)

    monkeypatch.setattr(dispatcher, "get_current_device", lambda: _Hopper())


def test_kernels_compile_to_sass(hopper):
    """Every kernel through the real compiler (NVVM, then ptxas to SASS), for Ampere and
    Hopper: the simulator runs kernels as Python and sees neither typing errors of the
    compiler nor what the hardware will execute. Checked in the SASS and ptxas' report: no
    local-memory spills, registers under ``REGISTER_BOUND``, no 64-bit shared-memory
    compare-and-swap loops anywhere (the histogram adds with native 32-bit shared atomics
    and flushes with native 64-bit global reductions); in the PTX: no float64 fused
    multiply-add in the split search, and the objectives' exact arithmetic."""
    for (name, v, cc), (ptx, log, sass) in compile_kernels([(8, 0), (9, 0)]).items():
        what = f"{name}[{v}] sm_{cc[0]}{cc[1]}"
        frame = re.search(
            r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
            r"(\d+) bytes spill loads",
            log,
        )
        assert frame and frame.groups() == ("0", "0", "0"), f"{what}: local memory\n{log}"
        regs = int(re.search(r"Used (\d+) registers", log).group(1))
        bound = REGISTER_BOUND.get(name, REGISTER_BOUND_DEFAULT)
        assert regs <= bound, f"{what}: {regs} registers > {bound}"
        check_block_resources(name, log, what)
        if sass is None:  # no shared-memory atomic at all: no compare-and-swap loop either
            assert "atom.shared" not in ptx and name not in HISTOGRAM_KERNELS, what
        else:
            assert "ATOMS.CAS" not in sass and "CAST.SPIN" not in sass, f"{what}: CAS loop"
            assert not re.search(r"ATOMS\.[\w.]*64", sass), f"{what}: 64-bit shared atomic"
            assert not re.search(r"\b(LDL|STL)\b", sass), f"{what}: local memory"
        if name in HISTOGRAM_KERNELS:
            assert re.search(r"\bATOMS\.ADD\s", sass), f"{what}: no 32-bit shared atomics"
            assert re.search(r"\bREDG?\.E\.ADD\.64\b", sass), f"{what}: global flush"
        if name == "histogram_bounded_kernel":
            # 32-bit adds in (g, h) pairs (the element loop is unrolled), none of whose
            # results is read (RZ: no wait for the old value, no carry), and no 64-bit
            # shared atomic (checked above)
            adds = re.findall(r"\bATOMS\.ADD\s+(\w+)", sass)
            assert adds and len(adds) % 2 == 0 and set(adds) == {"RZ"}, (
                f"{what}: shared adds {adds}"
            )
        if name == "search_kernel":
            assert not re.search(r"\bfma\.rn\.f64", ptx), f"{what}: float64 FMA"
            assert not re.search(r"\b(div\.approx|div\.full)\.f64", ptx), what
        if name in OBJECTIVE_KERNELS:
            check_exact_float_ptx(ptx, name)


#: The histogram kernels (``launch_rules.HIST_KERNELS``).
HISTOGRAM_KERNELS = ("histogram_kernel", "histogram_bounded_kernel")

#: Kernels built from ``gpufs.rules._exactmath`` (``cuda_kernels/objective.py``).
OBJECTIVE_KERNELS = (
    "logistic_gradients_kernel",
    "softmax_gradients_kernel",
    "squared_error_loss_kernel",
    "logistic_loss_kernel",
    "softmax_loss_kernel",
    "round_logistic_kernel",
    "round_softmax_kernel",
)


def check_exact_float_ptx(ptx, name):
    """Every float64 add / multiply is an explicit round-to-nearest ``add.rn`` / ``mul.rn``
    (dadd_rn / dmul_rn: never contracted, by NVVM or by ptxas); no FMA, no approximate or
    special-function instruction; divisions are IEEE ``div.rn`` (``1.0 / x`` compiles to
    ``rcp.rn``, the IEEE round-to-nearest reciprocal: the same bits)."""
    ops = re.findall(
        r"\b((?:add|sub|mul|fma|div|rcp|sqrt|ex2|lg2|mad)(?:\.[a-z0-9]+)*)\.f64\b", ptx
    )
    assert ops, f"{name}: no float64 arithmetic found"
    assert "add.rn" in ops and "mul.rn" in ops, f"{name}: {sorted(set(ops))}"
    allowed = {"add.rn", "mul.rn", "div.rn", "rcp.rn"}
    assert set(ops) <= allowed, f"{name}: float64 ops {sorted(set(ops) - allowed)}"
    assert not re.search(r"\bfma\.", ptx), f"{name}: FMA"
