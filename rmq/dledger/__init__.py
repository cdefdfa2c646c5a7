"""The DLedger commit log of RocketMQ 4.9.8 (openmessaging DLedger 0.3.1.2):
Raft entries and their files, the member state, leader election and log
replication over RocketMQ remoting, with DLedger's request codes and JSON
bodies so that rmq nodes and DLedger nodes can form one group."""
