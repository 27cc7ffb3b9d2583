"""Adapters: concrete implementations of the application ports, and their wiring helpers."""
