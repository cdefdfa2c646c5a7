"""Request and response custom headers of RocketMQ 4.9.8 (``common/protocol/header``),
each declared once and shared by the name server, the broker, the client and
rmq-admin.  Field names are the exact Java field names carried in extFields
(../shared/spec/PROTOCOL.md section 3).

* ``headers_namesrv``: requests the name server serves.
* ``headers_broker``: messaging and offset requests between clients and brokers.
* ``headers_admin``: administration requests to brokers and the calls brokers
  make into clients.
"""
