"""The name server: brokers register their topics here; clients ask it for routes."""
