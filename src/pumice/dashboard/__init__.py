"""The web dashboard (``pumice dashboard``): rocketmq-dashboard's pages and store and replication
health, over the admin client (docs/dashboard.md)."""
