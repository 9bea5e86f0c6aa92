"""AsyncInferQueue: a pool of infer requests that keeps a compiled model's streams busy."""
import threading

__all__ = ["AsyncInferQueue"]


class AsyncInferQueue:
    """``jobs`` requests of one compiled model (0: the model's optimal number,
    ``optimal_number_of_infer_requests``). ``start_async`` takes the next idle request (waiting
    for one when all are busy) and queues it; the callback set with ``set_callback`` runs as
    ``callback(request, userdata)`` on the thread that ran the request, after each run.
    ``wait_all`` waits for every request and raises the first run's ``kiln.Error``, if any."""

    def __init__(self, compiled_model, jobs=0):
        if jobs < 0:
            raise ValueError("AsyncInferQueue: jobs must be >= 0")
        n = jobs or max(1, int(compiled_model.get_property("optimal_number_of_infer_requests")))
        self._requests = [compiled_model.create_infer_request() for _ in range(n)]
        self._userdata = [None] * n
        self._idle = list(range(n))
        self._cond = threading.Condition()
        self._callback = None
        for i, request in enumerate(self._requests):
            request.set_callback(self._finished, i)

    def __len__(self):
        return len(self._requests)

    def __getitem__(self, i):
        return self._requests[i]

    def __iter__(self):
        return iter(self._requests)

    def set_callback(self, callback):
        """``callback(request, userdata)`` after every run (None: no callback)."""
        self._callback = callback

    def _finished(self, i):
        try:
            if self._callback is not None:
                self._callback(self._requests[i], self._userdata[i])
        finally:
            with self._cond:
                self._idle.append(i)
                self._cond.notify_all()

    def is_ready(self):
        """True when a request is idle (start_async would not wait)."""
        with self._cond:
            return bool(self._idle)

    def get_idle_request_id(self):
        """The index of an idle request, waiting for one when all are busy."""
        with self._cond:
            while not self._idle:
                self._cond.wait()
            return self._idle[0]

    def start_async(self, inputs=None, userdata=None):
        """Runs ``inputs`` on the next idle request; returns at once (unless all are busy)."""
        with self._cond:
            while not self._idle:
                self._cond.wait()
            i = self._idle.pop(0)
        self._userdata[i] = userdata
        try:
            self._requests[i].start_async(inputs)
        except BaseException:
            with self._cond:  # it never ran: idle again
                self._idle.append(i)
                self._cond.notify_all()
            raise

    def wait_all(self):
        """Waits for every request; raises the first failed run's kiln.Error."""
        with self._cond:
            while len(self._idle) < len(self._requests):
                self._cond.wait()
        for request in self._requests:
            request.wait()
