#!/bin/bash
# The SCRAM user clients log in as, set (or its password changed) through the admin client's mutual-TLS listener.
# The password comes from the environment and goes to the admin client in a file, never on a command line.
set -euo pipefail
: "${KAFKA_USER:?}" "${KAFKA_PASSWORD:?}" "${KAFKA_BOOTSTRAP_INTERNAL:?host:9094,...}"
certs=/etc/kafka/certs
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/admin.properties" <<PROPERTIES
security.protocol=SSL
ssl.keystore.type=PKCS12
ssl.keystore.location=$certs/admin.p12
ssl.keystore.password=$(cat "$certs/keystore.password")
ssl.truststore.type=PEM
ssl.truststore.location=$certs/ca.pem
PROPERTIES
# ConfigCommand splits the credential on commas (and would print it whole in its error): refuse one here instead.
if [[ $KAFKA_PASSWORD == *[,$'\n'\\]* ]]; then
  echo "KAFKA_PASSWORD may not contain a comma, a backslash or a line break" >&2
  exit 2
fi
printf 'SCRAM-SHA-512=iterations=8192,password=%s\n' "$KAFKA_PASSWORD" >"$work/scram.properties"
unset KAFKA_PASSWORD
java -Xmx256m -Dlog4j2.configurationFile=/opt/kafka/log4j2.properties -cp '/opt/kafka/libs/*' \
  kafka.admin.ConfigCommand --bootstrap-server "$KAFKA_BOOTSTRAP_INTERNAL" --command-config "$work/admin.properties" \
  --alter --entity-type users --entity-name "$KAFKA_USER" --add-config-file "$work/scram.properties"
