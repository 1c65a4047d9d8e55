"""DefaultRequestProcessor: the name server's request handlers, by request code.

========================================  ====================================================
code                                      answer
========================================  ====================================================
REGISTER_BROKER (103)                     extFields haServerAddr, masterAddr; body KVTable of
                                          ORDER_TOPIC_CONFIG
UNREGISTER_BROKER (104)                   SUCCESS
GET_ROUTEINFO_BY_TOPIC (105)              body TopicRouteData JSON, or TOPIC_NOT_EXIST (also
                                          without a topic field, as 4.9.7);
                                          ``orderTopicConf`` (the topic's ORDER_TOPIC_CONFIG
                                          KV entry) only with orderMessageEnable, as 4.9
GET_BROKER_CLUSTER_INFO (106)             body ClusterInfo JSON
GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206)  body TopicList JSON ``{"topicList": [...]}``
DELETE_TOPIC_IN_NAMESRV (216)             SUCCESS; with extField clusterName, only that
                                          cluster's brokers lose the topic
GET_TOPICS_BY_CLUSTER (224)               body TopicList of the cluster's brokers' topics
GET_SYSTEM_TOPIC_LIST_FROM_NS (304)       body TopicList of the cluster and broker names, with
                                          ``brokerAddr``: a broker to ask for the rest (305)
GET_UNIT_TOPIC_LIST (311),                body TopicList of the topics whose topicSysFlag has
GET_HAS_UNIT_SUB_TOPIC_LIST (312),        the unit flag (1); the unit-sub flag (2); the
GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313)  unit-sub flag and not the unit flag
WIPE_WRITE_PERM_OF_BROKER (205)           extFields wipeTopicCount; the broker's queue data lose
                                          their write bit until it registers again
ADD_WRITE_PERM_OF_BROKER (327)            extFields addTopicCount; the broker's queue data get
                                          perm 6 (read and write), as RocketMQ 4.9 sets it
UPDATE_NAMESRV_CONFIG (318)               body properties (RocketMQ keys), applied all or none;
                                          NO_PERMISSION for a black-listed key under any
                                          spelling (config_black_list.py), SYSTEM_ERROR naming
                                          an unknown key, a bad value or a key read at start
                                          only; the whole config then written to the
                                          configStorePath of start
GET_NAMESRV_CONFIG (319)                  body the config as properties (RocketMQ keys)
QUERY_DATA_VERSION (322)                  extFields changed (body DataVersion vs the one last
                                          registered); body the registered DataVersion
PUT/GET/DELETE_KV_CONFIG (100–102),       the KV config; GET answers QUERY_NOT_FOUND when
GET_KVLIST_BY_NAMESPACE (219)             the key or namespace is missing
========================================  ====================================================

With aclEnable, the codes of ``pumice.acl.permission.NAMESRV_WRITE_CODES`` are checked before
they get here (``NamesrvController``: SYSTEM_ERROR with the AclException remark, as a broker).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any

import orjson

from pumice.common.atomic_file import atomic_write
from pumice.config import ConfigError, apply_properties, conf_key, parse_properties, to_properties
from pumice.namesrv.kv_config_manager import KVConfigManager
from pumice.namesrv.namesrv_config import NamesrvConfig
from pumice.namesrv.route_info_manager import RouteInfoManager
from pumice.remoting.remoting_command import MissingFieldError, RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"

# NamesrvConfig fields that take effect at start only: UPDATE_NAMESRV_CONFIG refuses to change them
# (RocketMQ stores the new value and goes on with the old one until a restart)
START_ONLY_FIELDS = frozenset({"listen_port", "listen_host", "server_max_frame_length",
                               "server_max_partial_frame_bytes", "server_channel_max_idle_time_seconds",
                               "acl_enable"})  # fmt: skip


class DefaultRequestProcessor:
    def __init__(
        self,
        route_info_manager: RouteInfoManager,
        kv_config_manager: KVConfigManager,
        config: NamesrvConfig | None = None,
    ) -> None:
        self.routes = route_info_manager
        self.kv = kv_config_manager
        self.config = config if config is not None else NamesrvConfig()
        # both fixed at start: no update changes what is refused or where the config is written
        self.black_list = self.config.black_list()
        self.config_store_path = self.config.config_store_path
        self._handlers = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_ununit_topic_list,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_namesrv_config,
        }

    @property
    def codes(self) -> list[int]:
        return [int(c) for c in self._handlers]

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        return self._handlers[RequestCode(request.code)](channel, request)

    # -- brokers -----------------------------------------------------------------------

    def register_broker(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        name = req.ext_str("brokerName", required=True)
        addr = req.ext_str("brokerAddr", required=True)
        cluster = req.ext_str("clusterName", required=True)
        broker_id = req.ext_long("brokerId", required=True)
        ha = req.ext_str("haServerAddr", "") or ""
        if req.ext_bool("compressed"):
            return req.make_response(
                ResponseCode.SYSTEM_ERROR,
                "compressed REGISTER_BROKER bodies are not supported; set compressedRegister=false",
            )
        wrapper: dict[str, Any] | None = None
        if len(req.body):
            try:
                body = orjson.loads(req.body)
            except orjson.JSONDecodeError as e:
                raise MissingFieldError(f"the RegisterBrokerBody is not JSON: {e}") from None
            wrapper = body.get("topicConfigSerializeWrapper") if isinstance(body, dict) else None
        assert name is not None and addr is not None and cluster is not None and broker_id is not None
        try:
            result = self.routes.register_broker(cluster, addr, name, broker_id, ha, wrapper, channel)
        except ValueError as e:  # a body RocketMQ could not deserialize: nothing was registered
            raise MissingFieldError(f"bad RegisterBrokerBody: {e}") from None
        table = self.kv.get_by_namespace(ORDER_TOPIC_CONFIG) or {}
        return req.make_response(
            ResponseCode.SUCCESS,
            result.warning or None,
            ext_fields={"haServerAddr": result.ha_server_addr, "masterAddr": result.master_addr},
            body=orjson.dumps({"table": table}),
        )

    def unregister_broker(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        self.routes.unregister_broker(
            req.ext_str("clusterName", required=True) or "",
            req.ext_str("brokerAddr", required=True) or "",
            req.ext_str("brokerName", required=True) or "",
            req.ext_long("brokerId", required=True) or 0,
        )
        return req.make_response(ResponseCode.SUCCESS)

    def wipe_write_perm_of_broker(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        name = req.ext_str("brokerName", required=True) or ""
        count = self.routes.wipe_write_perm_of_broker(name)
        log.warning("wipe write perm of broker[%s], client: %s, %d", name, channel.remote_addr, count)
        return req.make_response(ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": count})

    def add_write_perm_of_broker(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        name = req.ext_str("brokerName", required=True) or ""
        count = self.routes.add_write_perm_of_broker(name)
        log.warning("add write perm of broker[%s], client: %s, %d", name, channel.remote_addr, count)
        return req.make_response(ResponseCode.SUCCESS, ext_fields={"addTopicCount": count})

    def query_data_version(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        for name in ("brokerName", "clusterName"):
            req.ext_str(name, required=True)
        req.ext_long("brokerId", required=True)
        addr = req.ext_str("brokerAddr", required=True) or ""
        try:
            version = orjson.loads(req.body) if len(req.body) else None
        except orjson.JSONDecodeError as e:
            raise MissingFieldError(f"the DataVersion body is not JSON: {e}") from None
        if not isinstance(version, dict):
            raise MissingFieldError("the DataVersion body is not a JSON object")
        changed, registered = self.routes.is_broker_topic_config_changed(addr, version)
        body = orjson.dumps(registered) if registered is not None else b""
        return req.make_response(ResponseCode.SUCCESS, ext_fields={"changed": changed}, body=body)

    # -- routes ------------------------------------------------------------------------

    def get_route_info_by_topic(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        topic = req.ext_str("topic")  # none at all is a topic with no route, as 4.9.7 answers
        data = self.routes.pickup_topic_route_data(topic) if topic is not None else None
        if topic is None or data is None:
            return req.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}"
            )
        # as 4.9's name server: the topic's ORDER_TOPIC_CONFIG entry rides on the route only with
        # orderMessageEnable (false by default); a Java producer given one builds its queues from it
        if self.config.order_message_enable:
            order = self.kv.get(ORDER_TOPIC_CONFIG, topic)
            if order is not None:
                data["orderTopicConf"] = order
        return req.make_response(ResponseCode.SUCCESS, body=orjson.dumps(data))

    def get_broker_cluster_info(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(ResponseCode.SUCCESS, body=orjson.dumps(self.routes.get_all_cluster_info()))

    def get_all_topic_list(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(
            ResponseCode.SUCCESS, body=orjson.dumps({"topicList": self.routes.get_all_topic_list()})
        )

    def get_topics_by_cluster(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        topics = self.routes.get_topics_by_cluster(req.ext_str("cluster", required=True) or "")
        return req.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"topicList": topics}))

    def delete_topic(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        self.routes.delete_topic(req.ext_str("topic", required=True) or "", req.ext_str("clusterName"))
        return req.make_response(ResponseCode.SUCCESS)

    def get_system_topic_list(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        topics, broker_addr = self.routes.get_system_topic_list()
        body: dict[str, Any] = {"topicList": topics}
        if broker_addr is not None:  # RocketMQ leaves a null brokerAddr out
            body["brokerAddr"] = broker_addr
        return req.make_response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    def get_unit_topic_list(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"topicList": self.routes.get_unit_topics()}))

    def get_has_unit_sub_topic_list(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        topics = self.routes.get_has_unit_sub_topics()
        return req.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"topicList": topics}))

    def get_has_unit_sub_ununit_topic_list(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        topics = self.routes.get_has_unit_sub_ununit_topics()
        return req.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"topicList": topics}))

    # -- the name server's own config (mqadmin getNamesrvConfig / updateNamesrvConfig) ------

    def get_namesrv_config(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(ResponseCode.SUCCESS, body=to_properties(self.config).encode())

    def update_namesrv_config(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        """All keys or none: applied to a copy and validated there first, as UPDATE_BROKER_CONFIG."""
        source = "UPDATE_NAMESRV_CONFIG"
        log.info("updateConfig called by %s", channel.remote_addr)
        try:
            props = parse_properties(bytes(req.body).decode("utf-8"), source)
        except UnicodeDecodeError as e:
            return req.make_response(ResponseCode.SYSTEM_ERROR, f"{source}: the body is not UTF-8: {e}")
        except ConfigError as e:
            return req.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        if not props:
            return req.make_response(ResponseCode.SUCCESS)
        black = self.black_list.refused(props)
        if black:  # RocketMQ's code and remark, and the keys
            return req.make_response(ResponseCode.NO_PERMISSION, self.black_list.remark(black))
        new = copy.copy(self.config)
        try:
            apply_properties([new], props, source)
            new.validate()
        except ValueError as e:  # ConfigError names the key; validate() names it too
            return req.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        changes: list[tuple[str, Any]] = []
        for f in dataclasses.fields(self.config):
            value = getattr(new, f.name)
            if getattr(self.config, f.name) != value:
                if f.name in START_ONLY_FIELDS:
                    return req.make_response(
                        ResponseCode.SYSTEM_ERROR,
                        f"{source}: {conf_key(self.config, f.name)} is read at start only and cannot change "
                        "while the name server runs",
                    )
                changes.append((f.name, value))
        for name, value in changes:
            setattr(self.config, name, value)
        self.routes.expired_ms = self.config.broker_channel_expired_time
        log.info("updateNamesrvConfig: %s", ", ".join(f"{conf_key(self.config, n)}={v}" for n, v in changes) or "-")
        self._persist_config()
        return req.make_response(ResponseCode.SUCCESS)

    def _persist_config(self) -> None:
        """The whole config to configStorePath as it was at start, as RocketMQ writes it after an
        update (a failure is logged: the change is in effect either way, and the file is not read
        at start). Only that file, its directory, ``.tmp`` and ``.bak`` are ever written."""
        path = self.config_store_path
        try:
            atomic_write(path, to_properties(self.config).encode())
        except OSError as e:
            log.error("cannot write the name server config to %s: %s", path, e)

    # -- KV config ---------------------------------------------------------------------

    def put_kv_config(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        saved = self.kv.put(
            req.ext_str("namespace", required=True) or "",
            req.ext_str("key", required=True) or "",
            req.ext_str("value", required=True) or "",
        )
        return self._kv_answer(req, saved)

    def _kv_answer(self, req: RemotingCommand, saved: bool) -> RemotingCommand:
        """SUCCESS once the KV config is on disk; SYSTEM_ERROR naming why not (the change holds
        and is saved again until it lands, but a restart before then loses it)."""
        if saved:
            return req.make_response(ResponseCode.SUCCESS)
        return req.make_response(
            ResponseCode.SYSTEM_ERROR,
            f"the KV config is changed but {self.kv.path} could not be saved ({self.kv.unsaved_cause}): it is saved "
            f"again every few seconds, and a restart before then loses the change",
        )

    def get_kv_config(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        ns = req.ext_str("namespace", required=True) or ""
        key = req.ext_str("key", required=True) or ""
        value = self.kv.get(ns, key)
        if value is None:
            return req.make_response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")
        return req.make_response(ResponseCode.SUCCESS, ext_fields={"value": value})

    def delete_kv_config(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        saved = self.kv.delete(req.ext_str("namespace", required=True) or "", req.ext_str("key", required=True) or "")
        return self._kv_answer(req, saved)

    def get_kv_list_by_namespace(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        ns = req.ext_str("namespace", required=True) or ""
        table = self.kv.get_by_namespace(ns)
        if table is None:
            return req.make_response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")
        return req.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"table": table}))
