"""The remoting client's errors (a module of their own: a mypyc-compiled module cannot define
subclasses of builtin exceptions such as ConnectionError)."""


class RemotingConnectError(ConnectionError):
    pass


class RemotingTimeoutError(TimeoutError):
    pass
