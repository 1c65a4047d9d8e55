"""Stand-ins for what a processor is handed: ``FakeChannel``, a client connection."""

from __future__ import annotations

from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.remoting.request_code import RequestCode


class FakeChannel(Channel):
    """A client connection at ``remote_addr``: records what is sent to it and whether it was closed.
    A Channel without a transport (its other fields unset): compiled processors check the type."""

    def __init__(self, remote_addr: str = "127.0.0.1:40000") -> None:
        self.remote_addr = remote_addr
        self.sent: list[RemotingCommand] = []
        self.closed = False

    def send(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)

    def close(self) -> None:
        self.closed = True

    def notices(self) -> list[str]:
        """The groups of the NOTIFY_CONSUMER_IDS_CHANGED it got (oneway), and forget them."""
        got = [c.ext_fields["consumerGroup"] for c in self.sent
               if c.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED and c.is_oneway]  # fmt: skip
        self.sent.clear()
        return got
