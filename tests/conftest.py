import pytest


@pytest.fixture(scope="session")
def lib():
    """The shipped library, loaded once for the whole session."""
    from dryz.check import subject
    return subject()
