"""Tests of `srtd collector`."""
