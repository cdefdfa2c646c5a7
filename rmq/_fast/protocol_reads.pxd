# cython: language_level=3
# ``Channel.write_bytes`` for compiled callers (rmq/_fast/protocol_reads.pyx).

cdef int write_frames(object channel, object out, bint more) except -1
