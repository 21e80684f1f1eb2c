"""The decoders' registry and traits: register and unregister, the checks of a declared trait,
and an isolated decoder's own timeout reaching its worker."""
import numpy as np
import pytest

import ctcbench
from ctcbench.errors import InputError
from ctcbench.runtime.decoders import (
    BUILTIN_DECODERS,
    DecoderTraits,
    decoder_names,
    get_decoder,
    register_decoder,
    unregister_decoder,
)
from ctcbench.runtime.protocol import BackendTimeout
from ctcbench.runtime.worker import shutdown_workers


@pytest.fixture
def registered():
    """``add(name, factory)`` registers a decoder for one test; unregistered afterwards."""
    added = []

    def add(name, factory):
        register_decoder(name, factory)
        added.append(name)
    yield add
    for name in reversed(added):
        if name in decoder_names():
            unregister_decoder(name)
    shutdown_workers()


def test_the_public_api_has_register_and_unregister():
    """ctcbench exports the decoders' registry functions beside the backends'."""
    assert ctcbench.register_decoder is register_decoder
    assert ctcbench.unregister_decoder is unregister_decoder
    assert ctcbench.get_decoder is get_decoder


def test_register_then_unregister(registered):
    """A registered decoder is listed, by role too, and decodes; unregistered, it is unknown."""
    registered("no-merge", "tests.decoding.faulty_decoders:NoMergeGreedy")
    assert "no-merge" in decoder_names() and "no-merge" in decoder_names("decoder")
    lp = np.log(np.array([[[0.1, 0.9]], [[0.1, 0.9]]]))  # (T=2, N=1, C=2): argmax 1, 1
    assert get_decoder("no-merge").decode(lp, [2], blank=0)[0][0].labels == (1, 1)  # its fault
    with pytest.raises(ValueError, match=r"^name: decoder 'no-merge' is already registered"):
        register_decoder("no-merge", "tests.decoding.faulty_decoders:EmptyGreedy")
    unregister_decoder("no-merge")
    assert "no-merge" not in decoder_names()
    with pytest.raises(KeyError, match=r"^decoder: expected one of .*, got 'no-merge'"):
        get_decoder("no-merge")


def test_unregistering_a_builtin_hides_it_until_registered_again():
    """greedy leaves the table and comes back when registered under its name."""
    unregister_decoder("greedy")
    try:
        assert "greedy" not in decoder_names()
        with pytest.raises(KeyError, match=r"^decoder: expected one of .*, got 'greedy'"):
            unregister_decoder("greedy")
    finally:
        register_decoder("greedy", BUILTIN_DECODERS["greedy"])
    assert get_decoder("greedy").traits.search == "greedy"


@pytest.mark.parametrize("attr, value, error, message", [
    ("role", "decodr", InputError,
     "Bad.role: expected one of aligner, decoder, got 'decodr' (did you mean 'decoder'?)"),
    ("score", 3, ValueError, "Bad.score: expected one of labelling, none, path, got 3"),
    ("dtype", "float16", InputError,
     "Bad.dtype: expected one of float32, float64, got 'float16' (did you mean 'float64'?)"),
    ("timeout_s", -1, ValueError, "Bad.timeout_s: expected a positive finite number of "
                                  "seconds, got -1"),
    ("isolated", "yes", ValueError, "Bad.isolated: expected True or False, got 'yes'"),
])
def test_a_trait_of_the_wrong_kind_names_class_and_attribute(attr, value, error, message):
    """One error "CLASS.ATTR: expected X, got Y", read off the class or an instance alike."""
    bad = type("Bad", (), {attr: value})
    for impl in (bad, bad()):
        with pytest.raises(error) as info:
            DecoderTraits.of(impl)
        assert str(info.value) == message and not isinstance(info.value, KeyError)


def test_declared_traits_are_normalised():
    """Lists become tuples and seconds floats, as for a backend."""
    traits = DecoderTraits.of(type("Declares", (), {"packages": ["numpy"], "timeout_s": 5})())
    assert traits.packages == ("numpy",) and traits.timeout_s == 5.0
    assert isinstance(traits.timeout_s, float)


def test_an_isolated_decoders_own_timeout_reaches_its_worker(registered):
    """A decoder that hangs is killed after its declared timeout_s (1.5 s), not the default
    120 s, and the next call runs in a fresh worker."""
    registered("hangs", "tests.decoding.faulty_decoders:HangingGreedy")
    decoder = get_decoder("hangs")
    assert decoder.worker is not None
    lp = np.log(np.full((3, 1, 2), 0.5))  # (T, N, C)
    bad = lp.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(BackendTimeout) as info:
        decoder.decode(bad, [3], blank=0)
    assert info.value.timeout_s == 1.5
    assert decoder.decode(lp, [3], blank=0)[0][0].labels == ()  # argmax ties: blank
    decoder.close()
