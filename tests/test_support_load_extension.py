"""``benchmarks.support.load_extension``: another build of a C extension loaded beside this
tree's (the A/B scripts' base build): a copy of this tree's ``.so`` at another path loads as a
separate module with the same contents, ``sys.modules`` keeps this tree's, and a missing file
or a name the file does not define fails clearly."""

from __future__ import annotations

import shutil
import sys

import pytest

from benchmarks.support import load_extension

EXTENSIONS = ["structgen.runtime.cpu._cpuops", "structgen.runtime.cpu._decodestep"]


@pytest.mark.parametrize("name", EXTENSIONS)
def test_a_copy_of_this_trees_build_loads_beside_it(name, tmp_path):
    own = pytest.importorskip(name)
    copy = tmp_path / "base" / own.__file__.rsplit("/", 1)[1]
    copy.parent.mkdir()
    shutil.copy(own.__file__, copy)
    mod = load_extension(copy, name)
    assert mod is not own and mod.__name__ == name and mod.__file__ == str(copy)
    assert sorted(n for n in dir(mod) if not n.startswith("__")) == sorted(
        n for n in dir(own) if not n.startswith("__")
    )
    assert sys.modules[name] is own


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no extension module at .*nope.so"):
        load_extension(tmp_path / "nope.so", EXTENSIONS[0])


def test_a_name_the_file_does_not_define_fails(tmp_path):
    own = pytest.importorskip(EXTENSIONS[0])
    with pytest.raises(ImportError):
        load_extension(own.__file__, "structgen.runtime.cpu._not_this_one")
