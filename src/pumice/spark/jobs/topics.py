"""The topics a job is asked for must be in the store: a mistyped ``--topic`` is an error, not
an empty result (issue 21)."""

from __future__ import annotations

from collections.abc import Iterable

from pumice.spark.store_files import store_topics

_LISTED = 10  # the store's topics named in the error, at most


class UnknownTopicError(ValueError):
    """Topics a store directory does not have (``store_files.store_topics``)."""

    def __init__(self, store_path: str, missing: list[str], known: list[str]) -> None:
        self.store_path, self.missing, self.known = store_path, missing, known
        if len(missing) == 1:
            what = f"topic {missing[0]} does not exist"
        else:
            what = f"topics {', '.join(missing)} do not exist"
        if not known:
            has = "it has no topics"
        else:
            shown = ", ".join(known[:_LISTED])
            more = f", … ({len(known)} in all)" if len(known) > _LISTED else ""
            has = f"its topics: {shown}{more}"
        super().__init__(f"{what} in {store_path} ({has})")


def check_topics(store_path: str, topics: Iterable[str]) -> None:
    """Raise ``UnknownTopicError`` naming every topic of ``topics`` the store does not have."""
    wanted = list(dict.fromkeys(topics))
    if not wanted:
        return
    known = store_topics(store_path)
    missing = [t for t in wanted if t not in set(known)]
    if missing:
        raise UnknownTopicError(store_path, missing, known)
