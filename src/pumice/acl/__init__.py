"""RocketMQ 4.9's plain ACL on the broker: accounts and white lists from plain_acl.yml, each
request's signature and permissions checked before it is processed."""
