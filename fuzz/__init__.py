"""Coverage-guided fuzzing of every reader bridge_lake points at untrusted bytes.

`harness.py` holds the rule (only `BridgeLakeError` may escape, within a time and memory
budget), `targets/` one small module per reader, `corpus.py` the seed corpora (real
recordings of bridge_lake_tests/data and small synthetic files), `run.py` the runner behind
`make fuzz` and the short run of the test suite. docs/fuzzing.md says how to use them.
"""
