"""rmq-dashboard: a web console for rmq clusters (``rmq.tools.dashboard.app``)."""
