"""Transactional messages on the broker (``broker/transaction`` of RocketMQ
4.9.8): the bridge to the store, the service that prepares, ends and
back-checks half messages, the check listener and the periodic check service.
See docs/messaging.md and ../shared/spec/STORE_FORMAT.md 13.

Only the header classes are imported by the package itself: the client's
transactional producer shares them and should not pull in broker modules.
"""
