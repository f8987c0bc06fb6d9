"""The Synapse fixture lives in tests/conftest.py, shared by every Matrix test."""
