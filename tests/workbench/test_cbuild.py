"""Run-time C builds: cached by content, compiler errors carry the compiler's own text."""

import pytest

from workbench.running import cbuild

pytestmark = pytest.mark.skipif(cbuild.compiler() is None, reason="no C compiler (apt-get install gcc)")


def test_build_is_cached_and_rebuilt_when_the_source_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(cbuild, "CACHE_DIR", tmp_path / "cache")
    src = tmp_path / "x.c"
    src.write_text("int main(void) { return 3; }\n")
    first = cbuild.build(src, "x", ["-O1"])
    assert first.exists() and cbuild.build(src, "x", ["-O1"]) == first
    src.write_text("int main(void) { return 4; }\n")
    assert cbuild.build(src, "x", ["-O1"]) != first


def test_compiler_errors_name_the_file_and_show_the_compiler_text(tmp_path, monkeypatch):
    monkeypatch.setattr(cbuild, "CACHE_DIR", tmp_path / "cache")
    src = tmp_path / "bad.c"
    src.write_text("int main(void) { return undefined_name; }\n")
    with pytest.raises(cbuild.BuildError, match=r"(?s)bad.c failed:.*undefined_name"):
        cbuild.build(src, "bad", [])
    assert not list((tmp_path / "cache").rglob("bad*"))  # nothing half-built left behind
