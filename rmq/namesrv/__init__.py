"""The rmq name server (RocketMQ 4.9.8 ``namesrv`` module): route tables, KV config,
broker liveness and the request processor, started by ``rmq-namesrv``."""
