"""pytest plugin (entry point ``pytest11``): fixtures and markers for reproducibility
tests. Imports no framework.

Two ways to assert that a training step is reproducible:

The ``reproducible`` marker runs the test function several times, each from the same
seeded state, and compares what it returns bit for bit (arrays, tensors, Keras models,
torch modules and optimizers, nested in dicts, lists, tuples, dataclasses; see
:mod:`fwd9m.compare`)::

    @pytest.mark.reproducible(runs=2, seed=0)
    def test_train_step():
        model = build()
        train_one_step(model)
        return model          # compared between the runs

The ``fwd9m_check`` fixture is :func:`fwd9m.assert_reproducible`, for checking one
function inside a larger test::

    def test_step(fwd9m_check):
        fwd9m_check(train_one_step, batch, runs=3)

Both fail the test with :class:`fwd9m.NondeterminismError`, whose message is the
report: which leaves differ, by how many elements, ULPs and absolute difference.
Fixtures are created once and shared by the runs, so build the model inside the test.
"""

from __future__ import annotations

import inspect

import pytest

MARKER = "reproducible"


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(runs=2, seed=0): run the test function `runs` times from the same seeded "
        "state and fail with fwd9m.NondeterminismError unless its return values agree bit for bit",
    )


@pytest.fixture
def fwd9m_check():
    """``fwd9m.assert_reproducible(fn, *args, runs=2, seed=0, **kwargs)``."""
    from .check import assert_reproducible

    return assert_reproducible


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    marker = pyfuncitem.get_closest_marker(MARKER)
    if marker is None:
        return None
    from .check import assert_reproducible

    options = dict(marker.kwargs)
    if marker.args:
        options.setdefault("runs", marker.args[0])
    unknown = set(options) - {"runs", "seed"}
    if unknown:
        raise pytest.UsageError(
            f"@pytest.mark.{MARKER}: unknown argument(s) {sorted(unknown)}; it takes runs= and seed="
        )
    fn = pyfuncitem.obj
    if inspect.iscoroutinefunction(fn):
        raise pytest.UsageError(f"@pytest.mark.{MARKER} does not support async tests")
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}

    def returned(**kw):
        value = fn(**kw)
        if value is None:
            raise pytest.fail.Exception(
                f"@pytest.mark.{MARKER}: {pyfuncitem.name} returned None, so there is nothing to compare "
                f"between its runs; return the loss, the weights or the model it trains"
            )
        return value

    returned.__qualname__ = getattr(fn, "__qualname__", pyfuncitem.name)
    assert_reproducible(returned, runs=options.get("runs", 2), seed=options.get("seed", 0), **kwargs)
    return True
