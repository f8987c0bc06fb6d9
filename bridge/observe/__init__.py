"""Watching the bridge: the hooks each event is told to (`hooks`), and their observers, Prometheus metrics
(`metrics`) and OpenTelemetry traces (`tracing`).

May use: `bridge.door.model`, `bridge.errors`. Health checks on the HTTP server are installed by the command line
(`bridge.cli.monitoring`), which can see the host.
"""
