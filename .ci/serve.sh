# Sourced by the CI scripts that talk to a live server: builds ctasd and
# starts it on a free loopback port, its data in "$work/data", logging JSON
# to "$work/server.log"; with an admin token ($token) unless $serve_open is
# set (then, as a fresh install runs, without tokens, loopback only), and a
# reader token ($reader_token) too when $serve_reader is set. Sets $port,
# $base_url and $server (the pid).
cargo build --locked --quiet
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=""
tokens=()
if [ -z "${serve_open:-}" ]; then
  token_output=$(target/debug/ctasd token --name ci --role admin)
  token=$(sed -n 's/^token: //p' <<<"$token_output")
  entries=$(sed -n 's/^tokens file line: //p' <<<"$token_output")
  if [ -n "${serve_reader:-}" ]; then
    reader_output=$(target/debug/ctasd token --name viewer --role reader)
    reader_token=$(sed -n 's/^token: //p' <<<"$reader_output")
    entries="$entries,$(sed -n 's/^tokens file line: //p' <<<"$reader_output")"
  fi
  tokens=("CTASD_TOKENS=$entries")
fi
env "${tokens[@]}" target/debug/ctasd serve --listen "127.0.0.1:$port" --data-dir "$work/data" \
  --log-format json --log info >"$work/server.log" 2>&1 &
server=$!
base_url="http://127.0.0.1:$port"
for _ in $(seq 1 50); do curl -fs "$base_url/readyz" >/dev/null && break; sleep 0.2; done
