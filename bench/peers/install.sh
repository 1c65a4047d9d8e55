#!/usr/bin/env bash
# Install what `python3 -m bench.peers` needs on a fresh Debian (bookworm) machine, the way
# .ci/run installs things: Debian packages only where missing (redis-server, nats-server,
# rabbitmq-server, strace, Java 17 and Maven), the Python clients (the `peers` extra of
# pyproject.toml), Kafka's jars (bench/peers/kafka/pom.xml) and Apache RocketMQ 4.9.7's broker and
# name server (tests/java-rocketmq/pom.xml) from Maven Central, and the Java benchmark driver of
# `python3 -m bench.peers.native_clients` (bench/peers/java-driver/pom.xml, rocketmq-client 4.9.8;
# Kafka's perf tools come with bench/peers/kafka/pom.xml). Maven caches in ~/.m2: running it again
# only rebuilds.
#
#     bash bench/peers/install.sh
#
# The Debian packages' own services (redis, nats, rabbitmq) are stopped and disabled where the
# package started them: the benchmark starts each broker itself, in a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
export PATH="$PATH:/usr/sbin:/sbin:/usr/lib/rabbitmq/bin"

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need+=(rabbitmq-server)
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
if ((${#need[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    mkdir -p /usr/share/man/man1  # slim images lack it, and the JRE's postinst links a man page there
    apt-get update -qq
    # policy-rc.d 101: the packages' postinst scripts do not start their system services
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        made_policy=1
    fi
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    if ((made_policy)); then rm -f "$policy"; fi
fi
# where a package's service did start (a machine with systemd), stop it: the benchmark runs its own
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    for svc in redis-server nats-server rabbitmq-server; do
        systemctl disable --now "$svc" >/dev/null 2>&1 || true
    done
fi
redis-server --version
nats-server --version
dpkg-query -W -f='rabbitmq-server ${Version}\n' rabbitmq-server
java -version 2>&1 | head -1
mvn -v | head -1

python3 -m pip install --quiet -e '.[peers,test]'
mvn -q -B -Dstyle.color=never -f bench/peers/kafka/pom.xml package
# Spark's Kafka source, for bench.spark_bench's Kafka row
mvn -q -B -Dstyle.color=never -f bench/peers/spark_kafka/pom.xml package
mvn -q -B -Dstyle.color=never -f tests/java-rocketmq/pom.xml package
# python3 -m bench.peers.native_clients: the Java driver on the official client
mvn -q -B -Dstyle.color=never -f bench/peers/java-driver/pom.xml package
echo "bench/peers: installed"
