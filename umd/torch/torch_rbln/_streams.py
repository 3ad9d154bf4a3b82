# SPDX-License-Identifier: GPL-2.0
"""Streams and events with torch.cuda's signatures and semantics.

A Stream is one librbln stream (a kernel queue).  Work on one stream runs
in order; ``Stream.wait_event`` makes later work of the stream wait on the
device, the host does not block.  Events time the card when made with
``enable_timing=True``.
"""

from . import _C
from ._device import _index, device_of


class Stream:
    """A stream of an rbln device (torch.cuda.Stream)."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device_index = _index(device)
        self.stream_id = _C.stream_new(self.device_index, priority)
        self._owned = True

    @classmethod
    def _wrap(cls, device_index, stream_id):
        s = cls.__new__(cls)
        s.device_index = device_index
        s.stream_id = stream_id
        s._owned = False
        return s

    @property
    def device(self):
        return device_of(self.device_index)

    def query(self):
        """True when all work enqueued on the stream is done."""
        return _C.stream_query(self.device_index, self.stream_id)

    def synchronize(self):
        """Blocks until all work enqueued on the stream is done."""
        _C.stream_synchronize(self.device_index, self.stream_id)

    def wait_event(self, event):
        """Later work of this stream waits for ``event`` (on the device)."""
        event.wait(self)

    def wait_stream(self, stream):
        """Later work of this stream waits for the work enqueued on ``stream``."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return (isinstance(other, Stream) and self.device_index == other.device_index
                and self.stream_id == other.stream_id)

    def __hash__(self):
        return hash((self.device_index, self.stream_id))

    def __repr__(self):
        return f"<torch_rbln.Stream device={self.device} stream_id={self.stream_id}>"

    def __del__(self):
        if getattr(self, "_owned", False):
            _C.stream_release(self.stream_id)


class Event:
    """A point in a stream (torch.cuda.Event)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise ValueError("rbln events cannot be shared between processes")
        self.enable_timing = enable_timing
        self._event = _C.Event(enable_timing)
        self.device_index = None

    def record(self, stream=None):
        """Marks the work enqueued on ``stream`` (default: the current stream)."""
        if stream is None:
            stream = current_stream()
        self._event.record(stream.device_index, stream.stream_id)
        self.device_index = stream.device_index

    def wait(self, stream=None):
        """Later work of ``stream`` waits for this event, on the device."""
        if stream is None:
            stream = current_stream()
        self._event.wait(stream.device_index, stream.stream_id)

    def query(self):
        return self._event.query()

    def synchronize(self):
        self._event.synchronize()

    def elapsed_time(self, end_event):
        """Card time in milliseconds from this event to ``end_event``."""
        return self._event.elapsed_time(end_event._event)

    def __repr__(self):
        return f"<torch_rbln.Event recorded={self._event.recorded()}>"


def current_stream(device=None):
    idx = _index(device)
    return Stream._wrap(idx, _C.current_stream(idx))


def default_stream(device=None):
    return Stream._wrap(_index(device), 0)


def set_stream(stream):
    if stream is not None:
        _C.set_current_stream(stream.device_index, stream.stream_id)


class StreamContext:
    """Makes ``stream`` (and its device) current in the block."""

    def __init__(self, stream):
        self.stream = stream
        self.prev_stream = None
        self.prev_device = None

    def __enter__(self):
        if self.stream is None:
            return self
        self.prev_device = _C.current_device()
        if self.prev_device != self.stream.device_index:
            _C.set_device(self.stream.device_index)
        self.prev_stream = _C.current_stream(self.stream.device_index)
        _C.set_current_stream(self.stream.device_index, self.stream.stream_id)
        return self

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        _C.set_current_stream(self.stream.device_index, self.prev_stream)
        if self.prev_device != self.stream.device_index:
            _C.set_device(self.prev_device)
        return False


def stream(stream):
    """Context manager selecting ``stream`` (torch.cuda.stream)."""
    return StreamContext(stream)
