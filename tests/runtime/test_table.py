"""The one registry design (ctcbench.runtime.table.Registry), on a registry of its own: names
from built-ins, a real entry-point group and registrations; lazy imports; hiding; the errors."""
from __future__ import annotations

import sys
import textwrap

import pytest

from ctcbench import BackendTraits, BackendUnavailable
from ctcbench.errors import UnknownName
from ctcbench.runtime.table import Registry

GROUP = "ctcbench.tests.things"  # a group of this test's own: the global tables stay as they are

THINGS = '''
class Quick:
    timeout_s = 5
    startup_timeout_s = 7.5

    def run(self, problem):
        raise AssertionError("never run here")


class Shadow(Quick):
    pass
'''


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """A registry with one built-in (``numpy``) and a real distribution on sys.path declaring
    ``quick``, ``numpy`` (shadowed by the built-in) and ``broken`` (its module is missing) in
    its group; ``lazy_thing`` is a module nothing has imported yet."""
    (tmp_path / "scratch_things.py").write_text(THINGS)
    (tmp_path / "lazy_thing.py").write_text("class Lazy(object):\n    pass\n")
    info = tmp_path / "scratch_things-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: scratch-things\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(f"""\
        [{GROUP}]
        quick = scratch_things:Quick
        numpy = scratch_things:Shadow
        broken = no_such_module_for_things:Thing
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_thing", raising=False)
    return Registry("thing", {"numpy": "ctcbench.backends.numpy_ref:NumpyBackend"}, GROUP,
                    BackendTraits)


def test_names_come_from_builtins_entry_points_and_registrations(registry):
    """Every source of names lands in one sorted list; only a built-in is "builtin"."""
    registry.register("later", "lazy_thing:Lazy")
    assert registry.names() == ["broken", "later", "numpy", "quick"]
    assert [registry.source(n) for n in registry.names()] == ["plugin", "plugin", "builtin",
                                                              "plugin"]


def test_a_builtin_name_wins_over_an_entry_point(registry):
    """An entry point cannot take a built-in's name."""
    assert registry.target("numpy") == "ctcbench.backends.numpy_ref:NumpyBackend"
    assert registry.load("numpy").__name__ == "NumpyBackend"


def test_the_view_is_read_only(registry):
    """The mapping handed out cannot change the table."""
    view = registry.view()
    with pytest.raises(TypeError):
        view["quick"] = "x:y"
    assert set(view) == {"broken", "numpy", "quick"}


def test_nothing_is_imported_until_asked_for(registry):
    """Registering a path and listing names import nothing; load imports that module."""
    registry.register("later", "lazy_thing:Lazy")
    registry.names()
    assert "lazy_thing" not in sys.modules
    assert registry.load("later").__name__ == "Lazy" and "lazy_thing" in sys.modules


def test_an_unknown_name_lists_the_known_ones_with_a_near_miss(registry):
    """One error naming the option, every known name and the near miss."""
    with pytest.raises(UnknownName) as info:
        registry.target("quik")
    assert str(info.value) == ("thing: expected one of broken, numpy, quick, got 'quik' "
                               "(did you mean 'quick'?)")
    with pytest.raises(KeyError, match=r"^--thing: expected one of .*, got 'nope'$"):
        registry.check(["quick", "nope"], "--thing")


def test_register_refuses_a_taken_name_unless_replace(registry):
    """A taken name needs replace=True; then the new target answers."""
    with pytest.raises(ValueError, match=r"^name: thing 'quick' is already registered "
                                         r"\(pass replace=True to replace it\)$"):
        registry.register("quick", "lazy_thing:Lazy")
    registry.register("quick", "lazy_thing:Lazy", replace=True)
    assert registry.load("quick").__name__ == "Lazy" and registry.source("quick") == "plugin"


@pytest.mark.parametrize("name, factory, message", [
    ("", "lazy_thing:Lazy", "name: expected a non-empty string, got ''"),
    ("x", 42, "factory: expected a class, a zero-argument function or a 'module:attr' "
              "string, got 42"),
])
def test_register_checks_its_arguments(registry, name, factory, message):
    """A bad name or factory is refused when registered, not when loaded."""
    with pytest.raises(ValueError) as info:
        registry.register(name, factory)
    assert str(info.value) == message and "x" not in registry.names()


def test_unregister_forgets_a_registration_and_hides_the_rest(registry):
    """A registration is forgotten; a built-in or an entry point is hidden until a
    registration under its name (the built-in's own path: the built-in again); an unknown
    name is a KeyError."""
    registry.register("later", "lazy_thing:Lazy")
    for name in ("later", "numpy", "quick"):
        registry.unregister(name)
    assert registry.names() == ["broken"]
    with pytest.raises(KeyError, match=r"^thing: expected one of broken, got 'quick'"):
        registry.unregister("quick")
    registry.register("quick", "scratch_things:Quick")
    registry.register("numpy", "ctcbench.backends.numpy_ref:NumpyBackend")
    assert registry.names() == ["broken", "numpy", "quick"]
    assert (registry.source("numpy"), registry.source("quick")) == ("builtin", "plugin")


def test_revision_counts_changes(registry):
    """Each register and unregister moves the revision callers cache on."""
    start = registry.revision
    registry.register("later", "lazy_thing:Lazy")
    registry.unregister("later")
    assert registry.revision == start + 2


def test_an_entry_point_that_does_not_import_is_unavailable_with_a_hint(registry):
    """A broken entry point is unavailable, with the reinstall of its distribution."""
    with pytest.raises(BackendUnavailable) as info:
        registry.load("broken")
    assert info.value.reason == ("cannot import thing 'broken': No module named "
                                 "'no_such_module_for_things'")
    assert info.value.hint == "pip install --force-reinstall scratch-things"


def test_build_reads_the_traits_and_gives_the_worker_their_timeouts(registry):
    """An isolated build's worker (not started here) is named by the entry point's path and
    takes the implementation's declared timeouts."""
    impl, traits, worker = registry.build("quick", isolated=True)
    assert type(impl).__name__ == "Quick" and traits.timeout_s == 5.0
    assert (worker.spec, worker.timeout_s, worker.startup_timeout_s) == (
        "scratch_things:Quick", 5.0, 7.5)
    assert worker.worker_pid is None
    assert registry.build("quick")[2] is None  # its trait: not isolated
    assert registry.spec("quick") == "scratch_things:Quick"
