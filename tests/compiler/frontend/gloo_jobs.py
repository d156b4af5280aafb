"""What the 2-process gloo tests (test_ddp.py, test_fsdp.py) share."""
import socket


def free_port() -> int:
    """A TCP port free on this machine now, for the process group's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
