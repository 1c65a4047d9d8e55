"""UPDATE_NAMESRV_CONFIG (318) and UPDATE_BROKER_CONFIG (25) against real `pumice namesrv` and
`pumice broker` processes: a black-listed key (RocketMQ 4.9.8's lists, and every path-like key) is
refused under every spelling the conf loader accepts, and nothing on disk or in the config changes.

Issue 30, point 3: the name server checked the list against the keys as sent, while the loader
also maps ``config_store_path`` or ``ConfigStorePath`` to configStorePath, so any client could make
it write its config file (and a ``.bak``) at a path of its choosing.
"""

from __future__ import annotations

import os
from pathlib import Path

from pumice.broker.broker_config import ALWAYS_BLACK_LISTED as BROKER_ALWAYS
from pumice.broker.broker_config import BrokerConfig
from pumice.config import parse_properties
from pumice.namesrv.namesrv_config import ALWAYS_BLACK_LISTED as NAMESRV_ALWAYS
from pumice.namesrv.namesrv_config import NamesrvConfig
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_config import MessageStoreConfig
from tests.helpers.clusters import Cluster, run
from tests.helpers.config_keys import BROKER_498, NAMESRV_498, loader_maps, path_like_keys, spellings


def tree(root: Path, skip: set[str]) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) under ``root``, but the top-level ``skip``."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d not in skip]
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = None
        for f in filenames:
            out[os.path.relpath(os.path.join(dirpath, f), root)] = Path(dirpath, f).read_bytes()
    return out


SEPARATORS = ("=", " = ", ":", "\t", " ")


def test_black_listed_keys_are_refused_under_every_spelling_and_nothing_is_written(tmp_path: Path) -> None:
    evil = tmp_path / "evil"
    own = tmp_path / "ns-config" / "namesrv.properties"
    c = Cluster(tmp_path, ns_conf=f"configStorePath={own}\n")
    try:
        servers = [
            ("namesrv", c.ns, RequestCode.UPDATE_NAMESRV_CONFIG, RequestCode.GET_NAMESRV_CONFIG,
             (NamesrvConfig,), [*NAMESRV_498, *path_like_keys(NamesrvConfig), *sorted(NAMESRV_ALWAYS)]),
            ("broker", c.br, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.GET_BROKER_CONFIG,
             (BrokerConfig, MessageStoreConfig),
             [*BROKER_498, *path_like_keys(BrokerConfig, MessageStoreConfig), *sorted(BROKER_ALWAYS)]),
        ]  # fmt: skip
        for _, _, _, _, classes, keys in servers:  # the spellings are the loader's own
            for key in dict.fromkeys(keys):
                for s in spellings(key)[1:]:
                    assert loader_maps(s, key, classes) or not loader_maps(key, key, classes), (s, key)

        async def main() -> None:
            client = RemotingClient()

            async def call(addr: str, code: int, body: str) -> RemotingCommand:
                return await client.invoke(addr, RemotingCommand(code=code, body=body.encode()), timeout_s=5)

            async def config(addr: str, code: int) -> dict[str, str]:
                r = await call(addr, code, "")
                assert r.code == ResponseCode.SUCCESS, r.remark
                return parse_properties(bytes(r.body).decode())

            try:
                # a normal update writes the name server's own file (and a second one its .bak)
                for body in ("orderMessageEnable=true\n", "brokerChannelExpiredTime=119000\n"):
                    r = await call(c.ns, RequestCode.UPDATE_NAMESRV_CONFIG, body)
                    assert r.code == ResponseCode.SUCCESS, r.remark
                assert own.exists() and Path(f"{own}.bak").exists()
                before = tree(tmp_path, skip={"store"})
                configs = {name: await config(addr, get) for name, addr, _, get, _, _ in servers}
                not_refused = []
                sent = 0
                for name, addr, update, _, _, keys in servers:
                    for n, key in enumerate(dict.fromkeys(keys)):
                        value = "tlsMode" if key == "configBlackList" else str(evil / name / str(n) / "x.properties")
                        if key == "rocketmqHome":
                            value = f"$(touch {evil}/pwned)"
                        for i, spelling in enumerate(spellings(key)):
                            sep = SEPARATORS[i % len(SEPARATORS)]
                            # with a key that is not black-listed: nothing of it is applied either
                            body = f"  {spelling}{sep}{value}  \norderMessageEnable=false\n" if name == "namesrv" \
                                else f"\t{spelling}{sep}{value}\nflushConsumerOffsetInterval=7000\n"  # fmt: skip
                            r = await call(addr, update, body)
                            sent += 1
                            if r.code != ResponseCode.NO_PERMISSION or not (r.remark or "").startswith(
                                "Can not update config in black list."
                            ) or spelling not in (r.remark or ""):  # fmt: skip
                                not_refused.append((name, spelling, r.code, r.remark))
                assert not not_refused, f"{len(not_refused)} of {sent} not refused: {not_refused}"
                assert not evil.exists()
                assert tree(tmp_path, skip={"store"}) == before  # the config file, its .bak: unchanged
                for name, addr, _, get, _, _ in servers:
                    assert await config(addr, get) == configs[name], name
                # a normal key still updates, on both
                r = await call(c.ns, RequestCode.UPDATE_NAMESRV_CONFIG, "orderMessageEnable=false\n")
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert parse_properties(own.read_text())["orderMessageEnable"] == "false"
                r = await call(c.br, RequestCode.UPDATE_BROKER_CONFIG, "flushConsumerOffsetInterval=7000\n")
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert (await config(c.br, RequestCode.GET_BROKER_CONFIG))["flushConsumerOffsetInterval"] == "7000"
                assert not evil.exists()
            finally:
                await client.close()

        run(main(), 120)
    finally:
        c.close()
