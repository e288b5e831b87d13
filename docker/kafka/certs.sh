#!/bin/bash
# The cluster's certificates, made once into /etc/kafka/certs (a volume the brokers mount): a CA, a key and
# certificate per broker (naming kafka-N, localhost, 127.0.0.1 and KAFKA_EXTRA_SAN's names) and one for the admin
# client that sets the SCRAM users, each in a PKCS#12 keystore under one random password. Clients need only ca.pem,
# which is public: it is also written to KAFKA_CA_DIR, the volume clients mount.
set -euo pipefail
umask 077
dir=/etc/kafka/certs
brokers=${KAFKA_BROKERS:?the broker names, space-separated}
if [[ -f $dir/ca.pem ]]; then
  [[ -n ${KAFKA_CA_DIR:-} ]] && install -m 644 "$dir/ca.pem" "$KAFKA_CA_DIR/ca.pem"
  echo "certificates exist in $dir: kept"
  exit 0
fi
work=$(mktemp -d)
openssl rand -base64 24 | tr -d '\n' >"$work/keystore.password"
openssl req -x509 -newkey rsa:3072 -nodes -days 3650 -subj "/CN=microingest Kafka CA" \
  -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
for name in $brokers admin; do
  openssl req -newkey rsa:3072 -nodes -subj "/CN=$name" -keyout "$work/$name.key" -out "$work/$name.csr" 2>/dev/null
  printf 'subjectAltName=DNS:%s,DNS:localhost,IP:127.0.0.1%s\nextendedKeyUsage=serverAuth,clientAuth\n' \
    "$name" "${KAFKA_EXTRA_SAN:+,$KAFKA_EXTRA_SAN}" >"$work/$name.ext"
  openssl x509 -req -in "$work/$name.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 3650 \
    -extfile "$work/$name.ext" -out "$work/$name.pem" 2>/dev/null
  openssl pkcs12 -export -name "$name" -inkey "$work/$name.key" -in "$work/$name.pem" -certfile "$work/ca.pem" \
    -passout "file:$work/keystore.password" -out "$work/$name.p12"
done
# The CA's key signs nothing after this: it is not kept.
cp "$work"/*.p12 "$work/keystore.password" "$dir/"
cp "$work/ca.pem" "$dir/ca.pem.partial" && chmod 644 "$dir/ca.pem.partial" && mv "$dir/ca.pem.partial" "$dir/ca.pem"
[[ -n ${KAFKA_CA_DIR:-} ]] && install -m 644 "$work/ca.pem" "$KAFKA_CA_DIR/ca.pem"
rm -rf "$work"
echo "certificates made in $dir for: $brokers admin"
