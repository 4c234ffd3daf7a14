"""Build of structgen's optional C extensions: csrc/qkernel.c -> structgen.runtime.cpu._qkernel
(quantized matmul), csrc/densekernel.c -> structgen.runtime.cpu._densekernel (fp32/bf16 small-M
matmul over both cores) and csrc/cpuops.c -> structgen.runtime.cpu._cpuops (fused norm, rotary,
KV store, paged attention and SiLU for the decoder layers).

Project metadata lives in pyproject.toml; this file only adds the CPU kernels.
The extensions are optional: without a C compiler (or where the build fails) the install still
succeeds and structgen falls back to torch's kernels with a one-time warning. OpenMP is used
when the compiler takes ``-fopenmp``, else the kernel runs on one thread.
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    """Compile with OpenMP if the compiler supports it; retry without it otherwise."""

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:
            if "-fopenmp" not in ext.extra_compile_args:
                raise
            print(f"structgen: building {ext.name} without OpenMP ({exc})")
            ext.extra_compile_args = [a for a in ext.extra_compile_args if a != "-fopenmp"]
            ext.extra_link_args = [a for a in ext.extra_link_args if a != "-fopenmp"]
            super().build_extension(ext)


# The float kernels' flags. -ffp-contract=off: the compiler never fuses a*b+c into one FMA
# (one rounding instead of two) on its own, so a scalar tail inside an
# __attribute__((target("avx2,fma"))) function rounds as the per-op path does (the fused ==
# per-op bit-equality tests in tests/runtime) and kquant.c keeps ggml's float32 order, whatever
# the compiler: GCC defaults to off only in an ISO mode (-std=c11; fast under -std=gnu11),
# clang to on (contraction within an expression) in every mode. FMAs the code asks for (fmaf,
# _mm256_fmadd_ps) are unaffected.
FLOAT_ARGS = ["-O3", "-std=c11", "-ffp-contract=off", "-fopenmp"]

setup(
    ext_modules=[
        # csrc/tokentrie.c -> structgen.fsm.index._tokentrie: the token-trie walk of the first
        # mask of a grammar state (numpy fallback in structgen/fsm/index/trie.py)
        Extension(
            "structgen.fsm.index._tokentrie",
            sources=["csrc/tokentrie.c"],
            depends=[
                "csrc/dfa_rows.h",
                "csrc/count_reach.h",
                "csrc/regex_derive.h",
                "csrc/regex_arena.h",
                "csrc/regex_tokens.h",
            ],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        ),
        # csrc/cfgrows.c -> structgen.fsm.grammar._cfgrows: the grammar automaton's
        # configuration step and row building (structgen/fsm/grammar/automaton.py, whose
        # Python path is the fallback)
        Extension(
            "structgen.fsm.grammar._cfgrows",
            sources=["csrc/cfgrows.c"],
            depends=[
                "csrc/sg_intmaps.h",
                "csrc/sg_earley_api.h",
                "csrc/dfa_rows.h",
                "csrc/regex_derive.h",
                "csrc/regex_arena.h",
            ],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        ),
        # csrc/earley.c -> structgen.fsm.grammar._earley: the Earley charts' scan step
        # (structgen/fsm/grammar/earley.py, whose Python path is the reference and fallback)
        Extension(
            "structgen.fsm.grammar._earley",
            sources=["csrc/earley.c"],
            depends=["csrc/sg_intmaps.h", "csrc/sg_earley_api.h"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        ),
        # csrc/regexlower.c -> structgen.fsm.regex._regexlower: the token loop of the regex
        # lowering (structgen/fsm/regex/lower.py, whose Python loop is the fallback), the
        # derivatives and DFA rows (terms.py, lazy_dfa.py: their Python methods the fallback)
        Extension(
            "structgen.fsm.regex._regexlower",
            sources=["csrc/regexlower.c"],
            depends=["csrc/regex_tokens.h", "csrc/regex_arena.h", "csrc/regex_derive.h"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        ),
        Extension(
            "structgen.runtime.cpu._qkernel",
            sources=["csrc/qkernel.c"],
            depends=["csrc/qkernel_core.h", "csrc/qkernel_rows.h", "csrc/qkernel_tiles.h", "csrc/qkernel_amx.h", "csrc/qkernel_i8tiles.h"],
            extra_compile_args=list(FLOAT_ARGS),
            extra_link_args=["-fopenmp"],
            optional=True,
        ),
        Extension(
            "structgen.runtime.cpu._densekernel",
            sources=["csrc/densekernel.c"],
            depends=["csrc/dense_core.h", "csrc/sg_pybind.h", "csrc/sg_simd.h"],
            extra_compile_args=list(FLOAT_ARGS),
            extra_link_args=["-fopenmp"],
            optional=True,
        ),
        Extension(
            "structgen.runtime.cpu._cpuops",
            sources=["csrc/cpuops.c"],
            depends=["csrc/cpuops_core.h", "csrc/sg_pybind.h", "csrc/sg_simd.h"],
            extra_compile_args=list(FLOAT_ARGS),
            extra_link_args=["-fopenmp"],
            optional=True,
        ),
        # csrc/decodestep.c -> every decoder layer of a small CPU step in one call
        # (structgen/runtime/cpu/decode_step.py; the per-op path without it)
        Extension(
            "structgen.runtime.cpu._decodestep",
            sources=["csrc/decodestep.c"],
            depends=[
                "csrc/cpuops_core.h",
                "csrc/dense_core.h",
                "csrc/qkernel_core.h",
                "csrc/qkernel_rows.h",
                "csrc/qkernel_tiles.h",
                "csrc/qkernel_amx.h",
                "csrc/qkernel_i8tiles.h",
                "csrc/sg_pybind.h",
                "csrc/sg_simd.h",
            ],
            extra_compile_args=list(FLOAT_ARGS),
            extra_link_args=["-fopenmp"],
            optional=True,
        ),
        # csrc/kquant.c -> ggml blocks (Q4_0/Q4_1/Q8_0/Q4_K/Q6_K) dequantized straight into the
        # final float32/bfloat16 tensor (structgen/runtime/loader/dequant.py; torch/gguf without)
        Extension(
            "structgen.runtime.loader._kquant",
            sources=["csrc/kquant.c"],
            depends=["csrc/sg_simd.h"],
            extra_compile_args=list(FLOAT_ARGS),
            extra_link_args=["-fopenmp"],
            optional=True,
        ),
    ],
    cmdclass={"build_ext": BuildExt},
)
