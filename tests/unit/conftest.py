"""Fixtures of the unit tests."""

from __future__ import annotations

import errno
import os

import pytest


@pytest.fixture
def no_space(monkeypatch) -> dict:
    """A disk that fills and empties: while ``state["full"]`` every block
    reservation (``posix_fallocate``) fails with ENOSPC, as a full disk's
    does, while the disk itself keeps its room (remarks then name a limit)."""
    real = os.posix_fallocate
    state = {"full": False}

    def fallocate(fd, offset, length):
        if state["full"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    return state
