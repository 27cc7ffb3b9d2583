"""Test doubles and service fixtures shared by the suites (and by benchmarks/)."""
