"""The rmq broker: start-up, controller, config managers, processors (RocketMQ ``broker``)."""
