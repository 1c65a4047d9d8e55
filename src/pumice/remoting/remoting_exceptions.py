"""The remoting client's errors (a module of their own: a mypyc-compiled module cannot define
subclasses of builtin exceptions such as ConnectionError)."""


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
