"""The bridge's one HTTP server (`server`): its connection limits (`guard`) and the h11 protocol that reports to them
(`h11`). Features (OAuth callback, web forms, health) register routes on it from above.

May use: `bridge.errors` and libraries.
"""
