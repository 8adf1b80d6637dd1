"""Fixtures of the CUDA test cases (see ``_cuda_setup.py`` for the three ways they run)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import numba_cube as cube  # noqa: E402

from _cuda_setup import DEVICE, FAKE_API, KIND, device_count  # noqa: E402


def pytest_report_header(config):
    return f"numba_cube CUDA cases: kind={KIND} device={DEVICE}"


@pytest.fixture(scope="session")
def kind() -> str:
    return KIND


@pytest.fixture(scope="session")
def fake_api():
    return FAKE_API


@pytest.fixture
def client():
    """The device's client on a fresh stream: captures and profiles belong to a stream, and
    tests must not see each other's."""
    with cube.stream():
        yield cube.client(f"{DEVICE}:0")


@pytest.fixture
def second_client():
    if device_count() < 2:
        pytest.skip("needs two CUDA devices")
    return cube.client(f"{DEVICE}:1")
