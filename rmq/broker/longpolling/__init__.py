"""Long polling of pulls (``PullRequestHoldService`` and its notifier)."""
