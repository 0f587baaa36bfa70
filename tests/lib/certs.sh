# certs.sh -- throwaway TLS certificates for the tests that run a TLS
# front (tests/redis/tls.sh, tests/server/tls.sh): sourced, in the
# directory the files go to; openssl's chatter goes to ssl.log there.
#   mkca NAME         NAME.key, NAME.crt: a self-signed CA
#   mkcert NAME CA    NAME.key, NAME.crt for 127.0.0.1 and localhost,
#                     signed by CA (one day, EC P-256)
mkca() { # NAME
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$1.key" -out "$1.crt" -days 1 -subj "/CN=$1" 2>>ssl.log
}
mkcert() { # NAME CA
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$1.key" -out "$1.csr" -subj "/CN=localhost" 2>>ssl.log &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$1.ext" &&
    openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" \
      -CAcreateserial -out "$1.crt" -days 1 -extfile "$1.ext" 2>>ssl.log
}
