# Sourced by the CI scripts that talk to a live server: builds ctasd and
# starts it on a free loopback port with an admin token, its data in
# "$work/data"; sets $port, $token, $base_url and $server (the pid), and
# logs as JSON to "$work/server.log".
cargo build --locked --quiet
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token_output=$(target/debug/ctasd token --name ci --role admin)
token=$(sed -n 's/^token: //p' <<<"$token_output")
CTASD_TOKENS=$(sed -n 's/^tokens file line: //p' <<<"$token_output") \
  target/debug/ctasd serve --listen "127.0.0.1:$port" --data-dir "$work/data" \
  --log-format json --log info >"$work/server.log" 2>&1 &
server=$!
base_url="http://127.0.0.1:$port"
for _ in $(seq 1 50); do curl -fs "$base_url/readyz" >/dev/null && break; sleep 0.2; done
