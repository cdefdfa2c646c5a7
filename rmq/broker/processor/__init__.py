"""Request processors of the broker (RocketMQ ``broker.processor``).

``admin`` (AdminBrokerProcessor, the default processor) lives here with its
headers; the messaging processors are looked up by the controller through
``rmq.broker.controller.MESSAGING_PROCESSORS``.
"""
