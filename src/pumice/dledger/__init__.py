"""DLedger: the Raft log RocketMQ 4.9 runs under ``enableDLegerCommitLog=true`` (dledger 0.3.1.2),
wire- and store-compatible (docs/DLEDGER.md)."""
