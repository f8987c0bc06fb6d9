"""The harnesses the tests and the benches share: real peers started on this machine, and fakes of what cannot run
here.

- `slack`: a fake Slack (Web API and Socket Mode over real HTTP) and the payloads the team's clicks send.
- `synapse`: a real Synapse homeserver, installed once into `.cache/` and started per session.
- `postgres`: a throwaway PostgreSQL cluster (a fresh database per test).
- `fleet`: several `run` processes of the bridge behind a round-robin balancer, sharing one store.
- `console_run`: one `run` process with the console, typed into and read line by line.
- `legacy_store`: the synchronous store as it last shipped, for the upgrade tests and the benches' baseline.

`bench/` imports from here only; fixtures that wrap these live in tests/conftest.py.
"""
