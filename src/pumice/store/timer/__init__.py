"""Timer messages (RocketMQ 5's RIP-43): any delivery time, through ``rmq_sys_wheel_timer``,
the ``timerlog`` and the ``timerwheel``, as RocketMQ 5.3.3 stores them (docs/v5/timer.md)."""
