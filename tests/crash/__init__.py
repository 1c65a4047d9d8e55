"""Crash tests: real store processes killed with SIGKILL while writing (see test_crash.py)."""
