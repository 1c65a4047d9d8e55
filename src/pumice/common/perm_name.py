"""Topic and broker permission bits (``org.apache.rocketmq.common.constant.PermName``).

=====  ========  ==================================================
bit    name      meaning
=====  ========  ==================================================
8      PRIORITY  (kept for the wire; 4.9 does not act on it)
4      READ      consumers may pull
2      WRITE     producers may send
1      INHERIT   topics auto-created from this one (TBW102) copy it
=====  ========  ==================================================
"""

from __future__ import annotations

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def perm_to_string(perm: int) -> str:
    """``PermName.perm2String``: ``RW-``-style, as mqadmin prints it."""
    return (
        ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + ("X" if perm & PERM_INHERIT else "-")
    )
