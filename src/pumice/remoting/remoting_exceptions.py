"""The remoting client's and server's errors, shared by both sides and by the broker's hooks."""


class RemotingConnectError(ConnectionError):
    pass


class RemotingTimeoutError(TimeoutError):
    pass


class RequestRefused(Exception):
    """Raised by a server's ``before_request`` hook: the request is answered SYSTEM_ERROR with
    ``remark`` (as a Java server answers a hook's exception) and never processed."""

    def __init__(self, remark: str) -> None:
        super().__init__(remark)
        self.remark = remark
