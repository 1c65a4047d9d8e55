"""The broker: config managers (topics, offsets, subscription groups), request processors, controller."""
