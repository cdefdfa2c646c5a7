"""The gRPC MessagingService of RocketMQ 5.x (``apache.rocketmq.v2``) for the
5.x SDKs, served in the broker process ("local mode").

Each RPC becomes requests to the broker's own processors, dispatched in
process through the main remoting server's processor table
(``rmq.proxy.local``); the endpoint never writes to the store itself.  The
protocol classes are generated at build time into ``rmq.proxy.v2``
(``rmq.proxy.codegen``).  The broker controller loads ``rmq.proxy.service`` by
name when ``enableProxy`` is set.
"""
