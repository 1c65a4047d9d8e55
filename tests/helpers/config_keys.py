"""Config keys as tests send them: RocketMQ 4.9.8's black lists (``NAMESRV_498``, ``BROKER_498``),
the path-like keys of config classes found by a rule of the tests' own (``path_like_keys``, wider
than pumice.config_black_list's), and the other spellings the conf loader maps to a key
(``spellings``, checked by ``loader_maps``).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import get_type_hints

from pumice.config import apply_properties, camel_to_snake, snake_to_camel

# RocketMQ 4.9.8: the keys each processor always refuses plus its config's configBlackList default
NAMESRV_498 = ("configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome")
BROKER_498 = ("configBlackList", "brokerConfigPath", "rocketmqHome")
PATH_WORDS = {"path", "paths", "dir", "dirs", "home", "file", "files", "checkpoint"}
KELVIN = "\u212a"  # KELVIN SIGN: str.lower() makes it "k", and camel_to_snake lowers


def path_like_keys(*classes: type) -> list[str]:
    """The camelCase keys of the classes' text fields and ignored keys with a path word in their name."""
    keys = []
    for cls in classes:
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if hints[f.name] in (str, str | None) and PATH_WORDS & set(f.name.split("_")):
                keys.append(getattr(cls, "CONF_NAMES", {}).get(f.name) or snake_to_camel(f.name))
        keys += [k for k in cls.IGNORED_KEYS if PATH_WORDS & set(camel_to_snake(k).split("_"))]
    return keys


def spellings(key: str) -> list[str]:
    """``key`` and the other spellings camel_to_snake maps to the same name: PascalCase,
    snake_case, both mixed, and (for keys with a k) the Kelvin sign in place of k."""
    words = camel_to_snake(key).split("_")
    snake = "_".join(words)
    out = [key, key[0].upper() + key[1:], snake, snake[0].upper() + snake[1:]]
    if len(words) > 1:
        out.append(snake_to_camel("_".join(words[:-1])) + "_" + words[-1])  # configStore_path
        out.append(words[0] + "_" + snake_to_camel("_".join(words[1:])))  # config_storePath
    if "k" in key:
        out.append(key.replace("k", KELVIN, 1))
    return list(dict.fromkeys(out))


def loader_maps(spelling: str, key: str, classes: tuple[type, ...]) -> bool:
    """Whether the conf loader sets the same field for ``spelling`` as for ``key`` (a key with no
    field, ignored or unknown, is taken under its exact spelling only)."""
    value = "/x/y" if key != "configBlackList" else "a;b"

    def fields_set(k: str) -> set[str]:
        configs = [cls() for cls in classes]
        before = [dataclasses.asdict(c) for c in configs]
        logging.disable(logging.WARNING)  # an ignored key's warning
        try:
            apply_properties(configs, {k: value})
        except ValueError:
            return set()
        finally:
            logging.disable(logging.NOTSET)
        return {n for c, b in zip(configs, before, strict=True) for n, v in dataclasses.asdict(c).items() if b[n] != v}

    return bool(fields_set(key)) and fields_set(spelling) == fields_set(key)


def ignored_keys_warned(text: str) -> set[str]:
    """The keys the loader's "has no effect in Pumice" warnings in ``text`` name: one key
    (``k=v has no effect in Pumice: why``) or several on one line (``N keys have no effect in
    Pumice: k=v, k2=v2 (why); ...``)."""
    import re

    keys = set(re.findall(r": (\w+)=\S* has no effect in Pumice", text))
    for listed in re.findall(r"\d+ keys have no effect in Pumice: (.*)", text):
        keys |= set(re.findall(r"(?:^|, |; )(\w+)=", listed))
    return keys
