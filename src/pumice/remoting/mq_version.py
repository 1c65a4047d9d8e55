"""MQVersion: the ``version`` a RemotingCommand carries is an ordinal of RocketMQ's MQVersion.Version
enum (4.9.8's, 612 names). Pumice speaks V4_9_8, as every 4.9.8 process does on its requests and
responses (``rocketmq.remoting.version`` = CURRENT_VERSION).

The enum, in order:

===========  ==========================================================  ========
ordinals     names                                                       count
===========  ==========================================================  ========
0–15         V3_0_0_SNAPSHOT, V3_0_0_ALPHA1, V3_0_0_BETA1 … BETA5,        16
             V3_0_0_BETA6_SNAPSHOT, V3_0_0_BETA6 … V3_0_0_BETA9,
             V3_0_0_FINAL
16–45        V3_0_1 … V3_0_15                                            2 each
46–85        V3_1_0 … V3_2_9                                             2 each
86–211       V3_3_1 … V3_9_9 (patch 1 to 9 only)                         2 each
212–611      V4_0_0 … V5_9_9                                             2 each
===========  ==========================================================  ========

"2 each": ``Vx_y_z_SNAPSHOT`` then ``Vx_y_z``. As MQVersion.getVersionDesc, an ordinal past the
end names the last (V5_9_9).
"""

from __future__ import annotations

from functools import cache


@cache
def _names() -> tuple[str, ...]:
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", *(f"V3_0_0_BETA{i}" for i in range(1, 6))]
    for i in range(6, 10):
        names += [f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"]
    names.append("V3_0_0_FINAL")
    releases = [(3, 0, z) for z in range(1, 16)]
    releases += [(3, y, z) for y in (1, 2) for z in range(10)]
    releases += [(3, y, z) for y in range(3, 10) for z in range(1, 10)]
    releases += [(x, y, z) for x in (4, 5) for y in range(10) for z in range(10)]
    for x, y, z in releases:
        names += [f"V{x}_{y}_{z}_SNAPSHOT", f"V{x}_{y}_{z}"]
    return tuple(names)


def version_desc(version: int) -> str:
    """The enum name of an ordinal (MQVersion.getVersionDesc)."""
    names = _names()
    if version < 0:
        return str(version)
    return names[min(version, len(names) - 1)]


def version_ordinal(name: str) -> int:
    """The ordinal of an enum name; ValueError for a name MQVersion does not have."""
    try:
        return _names().index(name)
    except ValueError:
        raise ValueError(f"{name!r} is not a RocketMQ version name") from None


CURRENT_VERSION = 409  # V4_9_8
