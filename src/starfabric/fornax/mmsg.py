"""sendmmsg(2)/recvmmsg(2) from numpy: the kernel's message headers as a structured dtype, so a
batch of frames (rows of one buffer) goes out or comes in with one system call per MMSG_MAX
frames and no Python per frame. Used by the Linux datapath's sender and the real-OVS driver."""

from __future__ import annotations

import ctypes

import numpy as np

#: struct mmsghdr and struct iovec of x86-64/aarch64 Linux (sendmmsg(2)): a msghdr (name,
#: namelen, iov, iovlen, control, controllen, flags) and the kernel's msg_len.
MMSGHDR = np.dtype([("name", np.uint64), ("namelen", np.uint32), ("_p0", np.uint32),
                    ("iov", np.uint64), ("iovlen", np.uint64), ("control", np.uint64),
                    ("controllen", np.uint64), ("flags", np.int32), ("_p1", np.int32),
                    ("len", np.uint32), ("_p2", np.uint32)])  # fmt: skip
IOVEC = np.dtype([("base", np.uint64), ("len", np.uint64)])
#: Messages per sendmmsg(2)/recvmmsg(2) call at most (the kernel's UIO_MAXIOV).
MMSG_MAX = 1024
#: recvmmsg(2) flag: return what is queued instead of waiting.
MSG_DONTWAIT = 0x40

_libc = ctypes.CDLL(None, use_errno=True)
sendmmsg = _libc.sendmmsg
sendmmsg.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int)
sendmmsg.restype = ctypes.c_int
recvmmsg = _libc.recvmmsg
recvmmsg.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p)
recvmmsg.restype = ctypes.c_int


def headers(base: int, stride: int, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The iovec and mmsghdr arrays for rows of `stride` bytes from address `base`, row i
    `lens[i]` bytes long. Keep both arrays alive while the kernel may read them."""
    n = len(lens)
    rows = np.arange(n, dtype=np.uint64)
    iov = np.zeros(n, IOVEC)
    iov["base"] = np.uint64(base) + rows * np.uint64(stride)
    iov["len"] = lens
    msg = np.zeros(n, MMSGHDR)
    msg["iov"] = np.uint64(iov.ctypes.data) + rows * np.uint64(IOVEC.itemsize)
    msg["iovlen"] = 1
    return iov, msg


__all__ = ["IOVEC", "MMSGHDR", "MMSG_MAX", "MSG_DONTWAIT", "headers", "recvmmsg", "sendmmsg"]
