"""Library code the tests share (fakes, data writers, process helpers), imported as
``from tests.helpers.X import ...``. Fixtures live in conftest modules, and those that tests
of several directories use in ``tests/fixtures`` (registered by the root conftest's
``pytest_plugins``). The root conftest has pytest rewrite this package's asserts, as it did
when these helpers lived in conftest modules."""
