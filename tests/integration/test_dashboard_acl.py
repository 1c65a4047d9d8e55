"""The dashboard's ACL page on a `pumice broker` with aclEnable=true, the dashboard signing with an
admin account (--access-key/--secret-key): file versions, an account created, then deleted after
the confirm step; the white list set."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers.clusters import Cluster, start, stop
from tests.helpers.ports import free_port
from tests.integration.test_acl_holes import ADMIN, PLAIN_ACL


@pytest.fixture
def acl_dashboard(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    c = Cluster(tmp_path, f"aclEnable=true\nrocketmqHome={home}\n")
    port = free_port()
    try:
        dashboard = start(["dashboard", "-n", c.ns, "--port", str(port), "--access-key", ADMIN.access_key,
                           "--secret-key", ADMIN.secret_key], "dashboard on")  # fmt: skip
        try:
            yield f"http://127.0.0.1:{port}", home / "conf" / "plain_acl.yml"
        finally:
            stop(dashboard)
    finally:
        c.close()


def post(url: str, **fields: str) -> str:
    data = urllib.parse.urlencode(fields).encode()
    return urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=30).read().decode()


def accounts(acl_file: Path) -> list[str]:
    return [a["accessKey"] for a in yaml.safe_load(acl_file.read_text())["accounts"]]


def test_acl_accounts_and_white_list_through_the_dashboard(acl_dashboard: tuple[str, Path]) -> None:
    base, acl_file = acl_dashboard
    page = urllib.request.urlopen(base + "/acl", timeout=30).read().decode()
    assert "plain_acl.yml (version" in page and "Traceback" not in page
    done = post(base + "/acl/account", accessKey="dashUser1", secretKey="dashSecret1", defaultTopicPerm="SUB",
                topicPerms="DashAcl=PUB")  # fmt: skip
    assert 'id="done"' in done and "account dashUser1 saved" in done and ": ok" in done
    assert "dashUser1" in accounts(acl_file)
    asked = post(base + "/acl/delete", accessKey="dashUser1")
    assert "delete the ACL account dashUser1" in asked and "dashUser1" in accounts(acl_file)  # not before the confirm
    done = post(base + "/acl/delete", accessKey="dashUser1", confirm="yes")
    assert "account dashUser1 deleted" in done and "dashUser1" not in accounts(acl_file)
    done = post(base + "/acl/white", addrs="10.10.*.*")
    assert "global white list set" in done
    assert yaml.safe_load(acl_file.read_text())["globalWhiteRemoteAddresses"] == ["10.10.*.*"]
    with pytest.raises(urllib.error.HTTPError) as bad:
        post(base + "/acl/account", accessKey="ab", secretKey="cd")
    assert bad.value.code == 400 and "at least 6 characters" in bad.value.read().decode()
