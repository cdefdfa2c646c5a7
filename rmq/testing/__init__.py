"""The harness that tests/, bench/, fuzz/ and the interop tests share: real rmq
processes on free loopback ports (``procs``), the one name server + broker
launcher (``cluster``), waits on conditions (``wait``), a cuttable TCP link
(``tcp_proxy``), a DLedger group of node processes (``dledger``), bad-request
generators (``fuzz``) and store comparisons (``store``).

It sits beside the tools, above the broker: it may start and drive every rmq
component, and nothing in rmq's runtime imports it."""
