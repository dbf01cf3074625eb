"""The steps that must not be cut short defer Ctrl-C and SIGTERM alike."""

from __future__ import annotations

import os
import signal

import pytest

from overbrainer.runs.interrupt import deferred_sigint


class Delivered(Exception):
    """What the test's own handler raises: the signal was not deferred."""


@pytest.fixture
def handlers():
    """A handler of the test's own for SIGINT and SIGTERM, put back as they were after."""

    def deliver(signum, frame):
        raise Delivered(signum)

    previous = {s: signal.signal(s, deliver) for s in (signal.SIGINT, signal.SIGTERM)}
    yield deliver
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_is_noted_and_the_handler_comes_back_after(handlers, signum):
    with deferred_sigint() as noted:
        os.kill(os.getpid(), signum)
        assert noted.caught
    assert noted.signum == signum
    assert signal.getsignal(signum) is handlers
    with pytest.raises(Delivered):
        os.kill(os.getpid(), signum)


def test_nothing_noted_when_no_signal_came(handlers):
    with deferred_sigint() as noted:
        pass
    assert not noted.caught
    assert noted.signum is None
