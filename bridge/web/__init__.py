"""The bridge's HTTP side: its one HTTP server (`server`), the server's connection limits (`guard`) and the h11
protocol that reports to them (`h11`), and the pages it serves (`forms`: web forms). Features (OAuth callback, web
forms, health) register routes on the server from above.

`server`, `guard` and `h11` may use `bridge.errors` and libraries; `forms` sits higher (beside `bridge.calls`) and may
use what lies below it.
"""
