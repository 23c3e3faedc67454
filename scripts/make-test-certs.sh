#!/usr/bin/env bash
# Makes a throw-away CA, a server certificate for the name "ank-server" (as real Ankaios servers
# have), an agent certificate for the agent name $2 (agent_A when not given) and one for the ank CLI,
# in the folder given as $1. Used by the TLS specs.
set -euo pipefail
dir=${1:?usage: make-test-certs.sh <folder> [agent name]}
agent=${2:-agent_A}
mkdir -p "$dir" && cd "$dir"
quiet() { "$@" >/dev/null 2>&1; }
quiet openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj "/CN=test-ca" -keyout ca-key.pem -out ca.pem
for who in server agent cli; do
  case $who in server) name=ank-server ;; agent) name=$agent ;; cli) name=ank-cli ;; esac
  quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$name" \
    -keyout "$who-key.pem" -out "$who.csr"
  printf 'subjectAltName=DNS:%s\n' "$name" > "$who.ext"
  quiet openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
    -extfile "$who.ext" -out "$who.pem"
done
chmod 600 ./*-key.pem
rm -f ./*.csr ./*.ext ./*.srl
