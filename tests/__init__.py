"""The test suite, a package so that every test module has a unique dotted name
(``tests.unit.data.test_acquire``): two folders may hold modules of the same basename, and
tests import their helpers as ``from tests.support.<module> import ...`` (see
:mod:`tests.support`)."""
