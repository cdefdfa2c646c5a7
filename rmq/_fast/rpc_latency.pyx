# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled twin of ``rmq.remoting.rpc_latency``'s recorder: the same
packed keys and the same rows, counted in C arrays (the row of the last key
is kept, so a run of like requests touches no dict) and read as lists."""

from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

cdef long long _BOUNDS[9]
_BOUNDS[:] = [1, 3, 5, 7, 10, 100, 1000, 2000, 3000]
cdef enum:
    _NB = 9
    _NO_RESPONSE = 0xFFFF


cdef class _Row:
    cdef long long counts[_NB + 2]  # per bucket, above the last, then the sum of ms

    def as_list(self):
        return [self.counts[i] for i in range(_NB + 2)]


cdef class RpcLatency:
    """Histogram rows keyed by (request code, response code, long polling,
    result) packed into one integer; see the twin for the layout."""

    cdef dict _rows
    cdef long long _last_key
    cdef _Row _last_row

    def __init__(self):
        self._rows = {}
        self._last_key = -1
        self._last_row = None

    @property
    def rows(self):
        """packed key -> [count per bucket ..., count above the last, sum of ms]"""
        return {key: (<_Row>row).as_list() for key, row in self._rows.items()}

    cpdef record(self, long request_code, object response_code, bint long_polling,
                 int result, long long elapsed_ms, long long count=1):
        cdef long long response = _NO_RESPONSE if response_code is None \
            else (<long long>response_code) & 0xFFFF
        cdef long long key = (request_code << 24) | (response << 8) \
            | ((<long long>long_polling) << 3) | result
        cdef _Row row
        cdef Py_ssize_t i = 0
        if key == self._last_key:
            row = self._last_row
        else:
            row = self._rows.get(key)
            if row is None:
                row = _Row()
                self._rows[key] = row
            self._last_key = key
            self._last_row = row
        while i < _NB and elapsed_ms > _BOUNDS[i]:
            i += 1
        row.counts[i] += count
        row.counts[_NB + 1] += elapsed_ms * count

    cpdef record_since(self, double start, long request_code, object response_code,
                       int result):
        """``record`` of a request that arrived at ``start`` (``perf_counter()``,
        CLOCK_MONOTONIC) and was not held for long polling."""
        cdef timespec ts
        clock_gettime(CLOCK_MONOTONIC, &ts)
        self.record(request_code, response_code, False, result,
                    <long long>((ts.tv_sec + ts.tv_nsec * 1e-9 - start) * 1000))
