"""Chat adapters: each translates one platform's events into `bridge.door.model` values and renders cards back."""
