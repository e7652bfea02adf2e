"""The performance report's experiments: each module runs one in Mininet and writes CSV, PNG and a summary.

Run one with `python -m experiments.<name>` (gloo, workers, loss, switch) or
`make exp-<name>`; docs/performance.md shows their results and reading.
"""
