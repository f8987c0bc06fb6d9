"""Benchmarks of whole bridge scenarios (`python -m bench.elicitation_roundtrip`, `python -m bench.pending_memory`,
`python -m bench.store_restart`, `python -m bench.store_commits`).

They print figures and ratios against a baseline run in the same process; they never assert timings.
"""
