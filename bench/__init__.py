"""rmq benchmarks: run from the checkout as modules (``python -m bench.run``)."""
