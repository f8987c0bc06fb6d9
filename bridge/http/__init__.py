"""The bridge's one HTTP server (`server`): its connection limits (`guard`) and the h11 protocol that reports to them
(`h11`). Features (OAuth callback, web forms, health) register routes on it from above; `person_links` signs the
links they make for one person (web forms, apps), and `templates/page.html` is the skeleton of their pages.

May use: `bridge.model`, `bridge.errors` and libraries.
"""
