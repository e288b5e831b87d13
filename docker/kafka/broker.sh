#!/bin/bash
# One KRaft node (broker and controller). Listeners: CLIENT (SASL_SSL, SCRAM-SHA-512) for the compose network,
# EXTERNAL (the same, advertised on the host's published port), INTERNAL (mutual TLS, between brokers and for the
# admin client) and CONTROLLER (mutual TLS). The storage is formatted at the first start only.
set -euo pipefail
: "${KAFKA_NODE_ID:?}" "${KAFKA_CLUSTER_ID:?}" "${KAFKA_VOTERS:?node@host:port,...}" "${KAFKA_EXTERNAL_ADVERTISED:?host:port}"
certs=/etc/kafka/certs
data=/var/lib/kafka/data
host=$(hostname)
until [[ -s $certs/ca.pem ]]; do echo "waiting for the certificates in $certs"; sleep 2; done
replicas=${KAFKA_REPLICATION_FACTOR:-3}
min_isr=${KAFKA_MIN_INSYNC_REPLICAS:-2}
password=$(cat "$certs/keystore.password")
umask 077
cat >/var/lib/kafka/server.properties <<PROPERTIES
process.roles=broker,controller
node.id=$KAFKA_NODE_ID
controller.quorum.voters=$KAFKA_VOTERS
listeners=CLIENT://:9092,CONTROLLER://:9093,INTERNAL://:9094,EXTERNAL://:9095
advertised.listeners=CLIENT://$host:9092,INTERNAL://$host:9094,EXTERNAL://$KAFKA_EXTERNAL_ADVERTISED
listener.security.protocol.map=CLIENT:SASL_SSL,EXTERNAL:SASL_SSL,INTERNAL:SSL,CONTROLLER:SSL
controller.listener.names=CONTROLLER
inter.broker.listener.name=INTERNAL
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.client.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.external.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.internal.ssl.client.auth=required
listener.name.controller.ssl.client.auth=required
ssl.keystore.type=PKCS12
ssl.keystore.location=$certs/$host.p12
ssl.keystore.password=$password
ssl.truststore.type=PEM
ssl.truststore.location=$certs/ca.pem
log.dirs=$data
num.partitions=3
default.replication.factor=$replicas
min.insync.replicas=$min_isr
offsets.topic.replication.factor=$replicas
transaction.state.log.replication.factor=$replicas
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$replicas
share.coordinator.state.topic.min.isr=$min_isr
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
PROPERTIES
java=(java -Xmx${KAFKA_HEAP:-512m} -Dlog4j2.configurationFile=/opt/kafka/log4j2.properties -cp '/opt/kafka/libs/*')
if [[ ! -f $data/meta.properties ]]; then
  "${java[@]}" kafka.tools.StorageTool format --cluster-id "$KAFKA_CLUSTER_ID" -c /var/lib/kafka/server.properties
fi
exec "${java[@]}" kafka.Kafka /var/lib/kafka/server.properties
