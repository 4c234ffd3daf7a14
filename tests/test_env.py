"""``structgen.env``: the one table of environment variables, the one module that reads them,
read when an engine is built or a grammar compiles (never at import)."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from pathlib import Path

import pytest

from structgen import env
from structgen.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "structgen"


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, path.read_text()


def test_readme_table_is_the_env_table() -> None:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"<!-- env-table[^>]*-->\n(.*?)<!-- /env-table -->", readme, re.S)
    assert found, "README.md lost its env-table markers"
    assert found.group(1) == env.markdown_table(), (
        "README's table of environment variables differs from structgen/env.py's: paste "
        "the output of python -c 'import structgen.env as e; print(e.markdown_table(), end=\"\")'"
    )


def test_only_env_py_names_or_reads_variables() -> None:
    offenders = []
    for path, text in _sources():
        if path == PACKAGE / "env.py":
            continue
        rel = path.relative_to(ROOT)
        for lineno, line in enumerate(text.splitlines(), 1):
            if "STRUCTGEN_" in line:
                offenders.append(f"{rel}:{lineno}: names a STRUCTGEN_ variable")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and node.attr in (
                "environ",
                "getenv",
                "putenv",
                "unsetenv",
            ):
                offenders.append(f"{rel}:{node.lineno}: os.{node.attr}")
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "os"
                and any(a.name in ("environ", "getenv", "putenv", "unsetenv") for a in node.names)
            ):
                offenders.append(f"{rel}:{node.lineno}: from os import ...")
    assert not offenders, "\n".join(offenders)


def test_table_rows_and_settings_fields_match() -> None:
    names = [v.name for v in env.VARIABLES]
    assert len(names) == len(set(names))
    fields = {v.field for v in env.VARIABLES if v.field is not None}
    assert fields == {f.name for f in dataclasses.fields(env.Settings)}
    # the package's own variables, and the two others it reads or sets
    assert {"TRITON_INTERPRET", "OPENAI_API_KEY"} <= set(names)
    assert [v.name for v in env.VARIABLES if v.set_by_structgen] == ["TRITON_INTERPRET"]
    for v in env.VARIABLES:
        assert v.type in ("0/1", "int", "path", "str") and v.default and v.read_when and v.effect


def test_defaults_when_unset_or_empty() -> None:
    assert env.read_env({}) == env.Settings()
    assert env.read_env({v.name: "" for v in env.VARIABLES}) == env.Settings()
    assert env.Settings().cache_dir == Path.home() / ".cache" / "structgen"


def test_values_parse() -> None:
    got = env.read_env(
        {
            "STRUCTGEN_CPU_OPS": "0",
            "STRUCTGEN_TOKENTRIE": "1",
            "STRUCTGEN_QKERNEL_THREADS": "3",
            "STRUCTGEN_CACHE_DIR": "~/sg",
        }
    )
    assert got == dataclasses.replace(
        env.Settings(), cpu_ops=False, qkernel_threads=3, cache_dir=Path("~/sg").expanduser()
    )


@pytest.mark.parametrize(
    "name, value",
    [
        ("STRUCTGEN_CPU_OPS", "yes"),
        ("STRUCTGEN_DECODE_STEP", "false"),
        ("STRUCTGEN_REGEXLOWER", " 0"),
        ("STRUCTGEN_QKERNEL_THREADS", "0"),
        ("STRUCTGEN_QKERNEL_THREADS", "two"),
    ],
)
def test_bad_value_names_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        env.read_env({name: value})


def test_read_is_at_call_time(monkeypatch, tmp_path) -> None:
    from structgen.runtime.loader.cache import cache_root

    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path))
    assert cache_root() == tmp_path
    monkeypatch.delenv("STRUCTGEN_CACHE_DIR")
    assert cache_root() == env.Settings().cache_dir
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert env.openai_api_key() == "k"
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert env.openai_api_key() is None


def test_set_default_only_for_variables_structgen_sets(monkeypatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    env.set_default("TRITON_INTERPRET", "1")
    assert os.environ["TRITON_INTERPRET"] == "0"
    with pytest.raises(ValueError):
        env.set_default("OPENAI_API_KEY", "x")


def test_compile_applies_the_grammar_switches(monkeypatch) -> None:
    """A compile reads ``tokentrie`` and ``regexlower`` and switches the C loops (on change)."""
    from structgen.fsm import compile_regex
    from structgen.fsm.index import masks as _mask_write
    from structgen.fsm.index import trie as _token_trie
    from structgen.fsm.regex import lower as _fast_lower

    built = (_token_trie._EXT, getattr(_token_trie._EXT, "fill_row", None), _fast_lower._EXT)
    try:
        monkeypatch.setenv("STRUCTGEN_TOKENTRIE", "0")
        monkeypatch.setenv("STRUCTGEN_REGEXLOWER", "0")
        compile_regex("a[bc]+")
        assert (_token_trie._c, _mask_write.fill_row, _fast_lower._c) == (None, None, None)
        monkeypatch.delenv("STRUCTGEN_TOKENTRIE")
        monkeypatch.setenv("STRUCTGEN_REGEXLOWER", "1")
        compile_regex("a[bc]+")
        assert (_token_trie._c, _mask_write.fill_row, _fast_lower._c) == built
        monkeypatch.setattr(_mask_write, "fill_row", None)  # a loop swapped by hand ...
        compile_regex("a[bc]+")
        assert _mask_write.fill_row is None  # ... stays while the setting is unchanged
        monkeypatch.setenv("STRUCTGEN_TOKENTRIE", "bad")
        for _ in range(2):  # refused at every compile, not only the first
            with pytest.raises(ConfigError, match="STRUCTGEN_TOKENTRIE"):
                compile_regex("a[bc]+")
        monkeypatch.setenv("STRUCTGEN_TOKENTRIE", "0")  # from "bad" straight to a value
        compile_regex("a[bc]+")
        assert (_token_trie._c, _mask_write.fill_row) == (None, None)
        monkeypatch.setenv("STRUCTGEN_TOKENTRIE", "")  # empty: the default
        compile_regex("a[bc]+")
        assert (_token_trie._c, _mask_write.fill_row) == built[:2]
    finally:
        monkeypatch.undo()
        compile_regex("a[bc]+")  # the environment's (default) switches again


def test_texts_change_with_the_variables(monkeypatch) -> None:
    """``texts`` (the compile's cheap change test) equals ``os.environ.get``'s reading."""
    fields = ("tokentrie", "regexlower")
    names = ("STRUCTGEN_TOKENTRIE", "STRUCTGEN_REGEXLOWER")
    seen = set()
    for first in (None, "", "0", "1", "bad"):
        for second in (None, "0", "1"):
            for name, value in zip(names, (first, second)):
                if value is None:
                    monkeypatch.delenv(name, raising=False)
                else:
                    monkeypatch.setenv(name, value)
            got = env.texts(fields)
            assert len(got) == 2 and (got == env.texts(fields))
            seen.add(got)
            # the plain-mapping path (an os.environ without its dict) reads the same values
            with monkeypatch.context() as m:
                m.setattr(os, "environ", dict(os.environ))
                assert env.texts(fields) == tuple(os.environ.get(n) for n in names)
            assert (got[0] is None) == (first is None) and (got[1] is None) == (second is None)
    assert len(seen) == 15  # every pair of values reads differently
    with pytest.raises(KeyError):
        env.texts(("nope",))


def test_kernel_settings_apply_on_change() -> None:
    from structgen.runtime.cpu import decode_step
    from structgen.runtime.cpu import dense as dense_kernel
    from structgen.runtime.cpu import ops as cpu_ops
    from structgen.runtime.cpu import quant as cpu_kernel
    from structgen.runtime.cpu.settings import apply_kernel_settings

    default = env.Settings()
    try:
        apply_kernel_settings(
            dataclasses.replace(
                default,
                qkernel=False,
                dense_kernel=False,
                cpu_ops=False,
                decode_step=False,
                qkernel_threads=1,
            )
        )
        assert (
            cpu_kernel._ENABLED,
            dense_kernel._ENABLED,
            cpu_ops._ENABLED,
            decode_step._ENABLED,
        ) == (False, False, False, False)
        assert cpu_kernel._THREADS == 1 and not cpu_kernel.available()
        cpu_kernel.set_threads(2)  # set by hand: kept while the setting does not change
        apply_kernel_settings(dataclasses.replace(default, qkernel_threads=1))
        assert cpu_kernel._THREADS == 2
        assert (
            cpu_kernel._ENABLED,
            dense_kernel._ENABLED,
            cpu_ops._ENABLED,
            decode_step._ENABLED,
        ) == (True, True, True, True)
    finally:
        apply_kernel_settings(default)
    assert cpu_kernel._THREADS is None


def test_engine_reads_the_environment_when_built(monkeypatch, tiny_llama_dir) -> None:
    from structgen import Engine
    from structgen.runtime.cpu import decode_step

    monkeypatch.setenv("STRUCTGEN_DECODE_STEP", "0")
    try:
        engine = Engine(str(tiny_llama_dir), dtype="float32", max_kv_tokens=256, page_size=4)
        assert engine.env.decode_step is False and decode_step._ENABLED is False
        engine.close()
        monkeypatch.setenv("STRUCTGEN_CPU_OPS", "maybe")
        with pytest.raises(ConfigError, match="STRUCTGEN_CPU_OPS"):
            Engine(str(tiny_llama_dir), dtype="float32", max_kv_tokens=256, page_size=4)
    finally:
        monkeypatch.undo()
        from structgen.runtime.cpu.settings import apply_kernel_settings

        apply_kernel_settings(env.read_env())
    assert decode_step._ENABLED is True
