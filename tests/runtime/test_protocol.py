"""The backend contract: the Backend protocol, its traits and their defaults, and the public
register_backend / unregister_backend."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import ctcbench
from ctcbench import (
    Backend,
    BackendTraits,
    BackendUnavailable,
    CTCProblem,
    UnsupportedProblem,
    get_backend,
    list_backends,
    register_backend,
    unregister_backend,
)
from ctcbench.core import oracles
from ctcbench.runtime.factory import load_factory
from ctcbench.runtime.protocol import run_takes
from ctcbench.runtime.registry import BUILTIN_BACKENDS, backend_names

# The defaults as the protocol documents them, written out here, not read from the code.
DOCUMENTED_DEFAULTS = {"isolated": False, "dtypes": None, "device": "cpu", "known_issues": {},
                       "packages": (), "timeout_s": 120.0, "startup_timeout_s": 300.0,
                       "prepare": None, "nondeterministic": None, "takes_grad_weights": False,
                       "takes_exact_shape": False, "compile_ahead": None}
METHOD_TRAITS = ("prepare", "compile_ahead")  # declared as methods: read bound

F32_64 = ("float32", "float64")
# read off run()'s signature, not declared as attributes
SIGNATURE_TRAITS = {"takes_grad_weights": "grad_weights", "takes_exact_shape": "exact_shape"}


def _adapter(name: str):
    """The built-in adapter object; an unavailable one (no CUDA, no framework) is made
    without running its constructor, since its class still declares its traits."""
    cls = load_factory(BUILTIN_BACKENDS[name])
    try:
        return cls()
    except BackendUnavailable:
        return cls.__new__(cls)


class OnlyRun:
    """The least a plugin can be: a run() and nothing else (the uniform-logits loss)."""

    def run(self, problem):
        T, N, C, _ = problem.shape

        class Result:
            loss = problem.input_lengths * np.log(C)
            grad_logits = np.zeros((T, N, C))
        return Result()


class Declares:
    """A plugin declaring every trait."""

    isolated = True
    dtypes = ["float32"]
    device = "cuda:1"
    known_issues = {"tf_basic/*": "off by one"}
    packages = ["numpy"]
    timeout_s = 5
    startup_timeout_s = 7.5
    nondeterministic = 1

    def prepare(self):
        pass

    def run(self, problem, **options):
        return OnlyRun().run(problem)


def _declared(cls, trait: str):
    """What ``cls`` says of ``trait``, as the protocol documents the forms it takes: lists as
    tuples, numbers as floats; ``...`` where it says nothing."""
    if trait in SIGNATURE_TRAITS:
        return SIGNATURE_TRAITS[trait] in inspect.signature(cls.run).parameters
    if trait not in vars(cls) and not any(trait in vars(k) for k in cls.__mro__[1:-1]):
        return ...
    value = getattr(cls, trait)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return value


@pytest.mark.parametrize("name", sorted(BUILTIN_BACKENDS))
def test_builtin_adapter_is_a_backend_with_its_declared_traits(name):
    """Each built-in satisfies the protocol; what its class declares is read, in the
    documented form, and every trait it leaves out takes the documented default."""
    impl = _adapter(name)
    assert isinstance(impl, Backend)
    traits = BackendTraits.of(impl)
    for trait, default in DOCUMENTED_DEFAULTS.items():
        got = getattr(traits, trait)
        said = _declared(type(impl), trait)
        if trait in METHOD_TRAITS and said is not ...:
            assert got.__func__ is said, trait
        else:
            assert (dict(got) if trait == "known_issues" else got) == (
                default if said is ... else said), trait


def test_builtins_keep_frameworks_in_workers_and_known_issues_in_data():
    """Every built-in on a framework of its own (it names packages) runs isolated, so a crash
    stays in the worker; every built-in scales its gradient by upstream weights; none
    declares known_issues (theirs are data, in cases/known_issues.toml)."""
    for name in BUILTIN_BACKENDS:
        traits = BackendTraits.of(_adapter(name))
        assert traits.isolated or not traits.packages, name
        assert traits.takes_grad_weights, name
        assert not traits.known_issues, name


def test_minimal_plugin_gets_every_default():
    """A plugin with only run() is a Backend and every trait takes its documented default."""
    plugin = OnlyRun()
    assert isinstance(plugin, Backend)
    traits = BackendTraits.of(plugin)
    for trait, expected in DOCUMENTED_DEFAULTS.items():
        got = getattr(traits, trait)
        assert (dict(got) if trait == "known_issues" else got) == expected, trait


def test_declared_traits_are_normalised():
    """Lists become tuples, numbers floats, the mapping read-only; run(**options) takes grad_weights."""
    traits = BackendTraits.of(Declares())
    assert traits.isolated is True and traits.device == "cuda:1"
    assert traits.dtypes == ("float32",) and traits.packages == ("numpy",)
    assert traits.timeout_s == 5.0 and isinstance(traits.timeout_s, float)
    assert traits.startup_timeout_s == 7.5 and traits.takes_grad_weights
    assert traits.nondeterministic == 1.0 and isinstance(traits.nondeterministic, float)
    assert callable(traits.prepare)
    with pytest.raises(TypeError):
        traits.known_issues["x"] = "y"


@pytest.mark.parametrize("attr, value, expected", [
    ("dtypes", "float32", "None or a non-empty tuple of names from"),
    ("dtypes", ("float8",), "None or a non-empty tuple of names from"),
    ("timeout_s", -1, "a positive finite number of seconds"),
    ("timeout_s", True, "a positive finite number of seconds"),
    ("isolated", "yes", "True or False"),
    ("nondeterministic", -1e-6, "None or a non-negative finite number"),
    ("nondeterministic", True, "None or a non-negative finite number"),
    ("known_issues", ["tf_basic/*"], "a mapping of 'case/dtype' glob to a reason"),
    ("packages", "jax", "a tuple of import names"),
    ("prepare", "soon", "None or a method taking no arguments"),
    ("compile_ahead", True, "None or a method taking no arguments"),
])
def test_a_trait_of_the_wrong_kind_names_class_and_attribute(attr, value, expected):
    """A malformed trait is one ValueError "CLASS.ATTR: expected X, got Y", not a late crash."""
    bad = type("BadPlugin", (OnlyRun,), {attr: value})()
    with pytest.raises(ValueError, match=rf"^BadPlugin\.{attr}: expected {expected}.*got "):
        BackendTraits.of(bad)


def test_object_without_run_is_not_a_backend():
    """The protocol's one requirement is run()."""
    assert not isinstance(object(), Backend)
    assert not isinstance(BackendTraits(), Backend)


def test_run_takes_reads_the_signature():
    """Keyword by name or through **kwargs counts; anything without a readable run() does not."""
    assert run_takes(Declares(), "grad_weights")  # **options
    assert not run_takes(OnlyRun(), "grad_weights")
    assert run_takes(_adapter("numpy"), "grad_weights")
    assert not run_takes(object(), "grad_weights")


def test_loaded_backend_exposes_traits_and_refuses_weights_it_cannot_take(register_backends):
    """get_backend gives name, impl and traits explicitly; grad_weights to a plugin whose
    run() lacks the keyword is UnsupportedProblem, not a TypeError."""
    register_backends("only-run", OnlyRun)
    loaded = get_backend("only-run")
    assert loaded.name == "only-run" and isinstance(loaded.impl, OnlyRun)
    assert loaded.traits == BackendTraits.of(loaded.impl) and not loaded.isolated
    assert isinstance(loaded, Backend) and loaded.worker_pid is None
    problem = CTCProblem(np.zeros((5, 1, 3)), [[1, 2]], [5], [2])
    assert loaded.run(problem).loss[0] == pytest.approx(5 * np.log(3))
    with pytest.raises(UnsupportedProblem, match="only-run: run\\(\\) takes no grad_weights"):
        loaded.run(problem, grad_weights=[2.0])


def test_register_then_unregister():
    """A registered name is listed and runs; unregistered, it is unknown again."""
    register_backend("uniform-guess", OnlyRun)
    try:
        assert "uniform-guess" in backend_names()
        info = {i.name: i for i in list_backends()}["uniform-guess"]
        assert info.available and info.source == "plugin"
    finally:
        unregister_backend("uniform-guess")
    assert "uniform-guess" not in backend_names()
    with pytest.raises(KeyError, match="backend: expected one of .*, got 'uniform-guess'"):
        get_backend("uniform-guess")


def test_duplicate_name_needs_replace(register_backends):
    """A known name without replace=True is a ValueError naming it; with it, the new factory wins."""
    register_backends("dup", OnlyRun)
    with pytest.raises(ValueError, match="name: backend 'dup' is already registered"):
        register_backend("dup", "ctcbench.backends.numpy_ref:NumpyBackend")
    assert isinstance(get_backend("dup").impl, OnlyRun)
    register_backend("dup", "ctcbench.backends.numpy_ref:NumpyBackend", replace=True)
    problem = CTCProblem(np.zeros((3, 1, 2)), [[1]], [3], [1])
    # the reference now answers: the uniform closed form, not OnlyRun's T log C
    assert get_backend("dup").run(problem).loss[0] == pytest.approx(oracles.uniform_loss(3, 2, [1]))


def test_unregistering_a_builtin_hides_it_until_registered_again():
    """torch disappears from the table and get_backend; registering the name brings it back."""
    unregister_backend("torch")
    try:
        assert "torch" not in backend_names()
        assert "torch" not in {i.name for i in list_backends()}
        with pytest.raises(KeyError, match="backend: expected one of .*, got 'torch'"):
            get_backend("torch")
        with pytest.raises(KeyError, match="backend: expected one of .*, got 'torch'"):
            unregister_backend("torch")
    finally:
        register_backend("torch", BUILTIN_BACKENDS["torch"])
    assert get_backend("torch").traits.dtypes == F32_64


def test_unregistering_an_entry_point_plugin_hides_it(installed_plugin):
    """An entry-point backend is hidden by unregister_backend, found again once re-registered."""
    assert "toy" in backend_names()
    unregister_backend("toy")
    try:
        assert "toy" not in backend_names() and "toy-gpu" in backend_names()
    finally:
        register_backend("toy", "toy_ctc:UniformGuess")
    assert get_backend("toy").run(CTCProblem(np.zeros((4, 1, 3)), [[1]], [4], [1])).loss[0] \
        == pytest.approx(4 * np.log(3))


def test_unregister_unknown_name_lists_the_known_ones():
    """One KeyError naming the unknown backend and every known one."""
    with pytest.raises(KeyError, match="backend: expected one of .*numpy.*torch.*, got 'nope'$"):
        unregister_backend("nope")


@pytest.mark.parametrize("name, factory, expected", [
    ("", OnlyRun, "name: expected a non-empty string"),
    ("x", 42, "factory: expected a class, a zero-argument function or a 'module:attr' string"),
    ("x", "no-colon", "factory: expected"),
])
def test_register_checks_its_arguments(name, factory, expected):
    """A bad name or factory is refused at registration, not when the backend is asked for."""
    with pytest.raises(ValueError, match=expected):
        register_backend(name, factory)
    assert "x" not in backend_names()


def test_register_alias_still_works_and_warns():
    """ctcbench.register (deprecated) registers through register_backend and says so."""
    with pytest.warns(DeprecationWarning, match="register_backend"):
        ctcbench.register("via-alias", OnlyRun)
    try:
        assert "via-alias" in backend_names()
    finally:
        unregister_backend("via-alias")


class CompilesAhead:
    """Declares compile_ahead (counting its calls); answers as the float64 reference."""

    asked = 0

    def compile_ahead(self):
        CompilesAhead.asked += 1
        return None

    def run(self, problem, *, grad_weights=None):
        return get_backend("numpy").run(problem, grad_weights=grad_weights)


def test_compare_compiles_ahead_through_the_trait(register_backends, tmp_path):
    """compare asks a backend declaring compile_ahead once, before its rows, which stay exact."""
    from ctcbench.compare.run import compare
    register_backends("ahead", CompilesAhead)
    assert BackendTraits.of(CompilesAhead()).compile_ahead is not None
    CompilesAhead.asked = 0
    result = compare(["ahead"], cases=["single_alignment_repeats"], dtypes=["float64"],
                     out=tmp_path / "c", progress=False, plot=False)
    assert CompilesAhead.asked == 1
    assert list(result.rows["status"]) == ["ok"]
