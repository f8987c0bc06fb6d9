"""Chat adapters: each translates one platform's events into `bridge.model` values and renders cards back."""
