"""The bridge's HTTP side: its one HTTP server (`server`), the server's connection limits (`guard`) and the h11
protocol that reports to them (`h11`), and the pages it serves (`forms`: web forms; `apps`: MCP Apps). Features
(OAuth callback, web forms, apps, health) register routes on the server from above. `person_links` signs the links
those pages give one person, and `templates/page.html` is the skeleton of their pages.

`server`, `guard` and `h11` may use `bridge.errors` and libraries; `person_links` also `bridge.door.model`; `forms`
and `apps` sit higher (beside and below `bridge.calls`) and may use what lies below them.
"""
