"""Side-by-side benchmark of Pumice and other brokers on this machine: ``python3 -m bench.peers``
(see __main__.py). Install the peers first with ``bash bench/peers/install.sh``."""
