"""The compiled/twin switch itself."""

from pathlib import Path

import rmq._fast as fast

PYX = sorted(p.stem for p in Path(fast.__file__).parent.glob("*.pyx"))


def test_every_extension_follows_the_environment():
    for name in PYX:
        mod = fast.compiled(name)
        if fast.NO_EXTENSIONS:
            assert mod is None, name
        elif fast.REQUIRE_EXTENSIONS:
            assert mod is not None, f"compiled module {name} is not built"


def test_unknown_module_is_none_without_require(monkeypatch):
    monkeypatch.setattr(fast, "REQUIRE_EXTENSIONS", False)
    monkeypatch.setattr(fast, "NO_EXTENSIONS", False)
    assert fast.compiled("no_such_module") is None
