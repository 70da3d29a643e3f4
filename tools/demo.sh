#!/usr/bin/env bash
# The llmgate demo: installs what is missing, builds, starts six simulated
# providers (three OpenAI-compatible, one Anthropic-style, one Gemini-style,
# one playing Amazon Bedrock and Vertex AI) and the gateway in front of them, sends a few requests, and prints how to
# call it with curl and the OpenAI SDK. Ctrl-C stops everything.
#   tools/demo.sh              # runs until Ctrl-C, the gateway on 127.0.0.1:8080
#   tools/demo.sh --port 9000  # on another port (LLMGATE_DEMO_PORT too); 0: any free one.
#                              # Off 8080 the simulated providers take free ports as well,
#                              # so a second demo (the test suite's) runs beside yours.
#   tools/demo.sh --smoke      # sends the sample requests and exits (used by the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
SMOKE=0
PORT=${LLMGATE_DEMO_PORT:-8080}
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --port) PORT=${2:?--port needs a port}; shift ;;
    --port=*) PORT=${1#--port=} ;;
    *) echo "usage: tools/demo.sh [--smoke] [--port PORT]" >&2; exit 2 ;;
  esac
  shift
done

# Only what the demo needs is installed and built (tools/test.sh does the rest).
[ "${LLMGATE_DEMO_NO_SETUP:-0}" = 1 ] || LLMGATE_DEPS=demo tools/setup.sh
BIN=${BUILD_DIR:-build}/bin
RUN=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export DEMO_GROQ_KEY=demo-key-groq DEMO_TOGETHER_KEY=demo-key-together DEMO_EURO_KEY=demo-key-euro \
  DEMO_ANTHROPIC_KEY=demo-key-anthropic DEMO_GEMINI_KEY=demo-key-gemini
# The simulated providers: on 9101-9105 beside a gateway on 8080 (as
# deploy/demo/llmgate.yaml says), else on free ports, written into a copy of
# the config.
declare -A SIM_PORT
start_sim() {  # name port seed sim-options...
  local name=$1 port=$2 seed=$3
  shift 3
  "$BIN/llmgate-sim" --listen "127.0.0.1:$port" "$@" --profiles "deploy/demo/$name.yaml" \
    --seed "$seed" --port-file "$RUN/$name.port" >"$RUN/$name.log" 2>&1 &
  pids+=($!)
}
port_of() {  # port-file: waits for it (10 s)
  for _ in $(seq 100); do
    [ -s "$1" ] && { cat "$1"; return; }
    sleep 0.1
  done
  echo "demo: nothing listening ($1)" >&2
  exit 1
}
sims=(groq-sim together-sim euro-sim anthropic-sim gemini-sim cloud-sim)
keys=("$DEMO_GROQ_KEY" "$DEMO_TOGETHER_KEY" "$DEMO_EURO_KEY" "$DEMO_ANTHROPIC_KEY" "$DEMO_GEMINI_KEY")
# The Bedrock side of cloud-sim checks every request's signature against
# these; the gateway finds them where AWS's SDKs look first.
export AWS_ACCESS_KEY_ID=AKIDDEMOEXAMPLE AWS_SECRET_ACCESS_KEY=demo/bedrock/secret/key
unset AWS_SESSION_TOKEN AWS_PROFILE
# Each sim speaks every protocol; anthropic-sim and gemini-sim are reached
# as Anthropic (…/v1/messages) and as Gemini
# (…/v1beta/models/M:streamGenerateContent); cloud-sim as Bedrock
# (/model/M/converse-stream, signed) and as Vertex AI (a publisher path,
# with tokens from its metadata-server endpoint, which it requires).
for i in "${!sims[@]}"; do
  fixed=$((9101 + i))
  port=$([ "$PORT" = 8080 ] && echo "$fixed" || echo 0)
  if [ "${sims[$i]}" = cloud-sim ]; then
    start_sim cloud-sim "$port" "$fixed" --require-token \
      --aws-key "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
  else
    start_sim "${sims[$i]}" "$port" "$fixed" --api-key "${keys[$i]}"
  fi
done
CONFIG=$RUN/llmgate.yaml
subst=(-e "s/^\(      port: \)8080/\1$PORT/")
for i in "${!sims[@]}"; do
  SIM_PORT[${sims[$i]}]=$(port_of "$RUN/${sims[$i]}.port")
  subst+=(-e "s#127.0.0.1:$((9101 + i))/#127.0.0.1:${SIM_PORT[${sims[$i]}]}/#")
done
sed "${subst[@]}" deploy/demo/llmgate.yaml >"$CONFIG"
# Vertex AI's tokens: from cloud-sim's metadata-server endpoint.
export GCE_METADATA_HOST=127.0.0.1:${SIM_PORT[cloud-sim]}

"$BIN/llmgate" --check-config "$CONFIG" >/dev/null
"$BIN/llmgate" --config "$CONFIG" --log-level info --port-file "$RUN/llmgate.port" \
  >"$RUN/llmgate.log" 2>&1 &
gateway_pid=$!
pids+=("$gateway_pid")
PORT=$(port_of "$RUN/llmgate.port") || { cat "$RUN/llmgate.log"; exit 1; }

for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null || { cat "$RUN/llmgate.log"; exit 1; }

cat <<MSG

llmgate is listening on http://127.0.0.1:$PORT in front of six simulated providers:
  groq-sim       OpenAI     us-east     TTFT ~180 ms  ~280 tok/s  \$0.79/1M out  (5% answered 429)
  together-sim   OpenAI     us-west     TTFT ~450 ms  ~110 tok/s  \$0.88/1M out
  euro-sim       OpenAI     eu-west     TTFT ~1.1 s   ~45 tok/s   \$0.30/1M out
  anthropic-sim  Anthropic  us-east     TTFT ~650 ms  ~75 tok/s   \$15.00/1M out (2% answered 529)
  gemini-sim     Gemini     us-central  TTFT ~320 ms  ~170 tok/s  \$2.50/1M out
  cloud-sim      as bedrock-sim (Converse, SigV4, AWS event stream)  TTFT ~420 ms  \$4.00/1M out
             and as vertex-sim (Gemini on Vertex AI, a token the gateway renews)  TTFT ~360 ms
Public models: fast-chat (the three OpenAI-style ones, latency policy with hedging),
cheap-chat (cost policy, p95 TTFT under 1.5 s), eu-chat (euro-sim only), reasoning-chat
(together-sim playing a reasoning model: reasoning first, then the answer), mixed-chat
(groq-sim, anthropic-sim as "claude-sonnet-4-5" and gemini-sim as "gemini-2.5-flash":
one OpenAI API in front of three wire protocols, ranked by the latency policy), cloud-chat
(bedrock-sim and vertex-sim: cloud accounts with their own credentials).

== A streamed request (response headers show the deployment, attempts and TTFT) ==
MSG
curl -sS -N -D - "http://127.0.0.1:$PORT/v1/chat/completions" \
  -H 'Content-Type: application/json' \
  -d '{"model":"fast-chat","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"Say hello"}]}'

echo "== A non-streamed request =="
curl -sS "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"eu-chat","max_tokens":12,"messages":[{"role":"user","content":"Say hello"}]}'
echo; echo
echo "== A reasoning model: message.reasoning_content, usage.completion_tokens_details =="
curl -sS "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"reasoning-chat","max_tokens":40,"messages":[{"role":"user","content":"Think, then say hello"}]}'
echo; echo
echo "== mixed-chat, streamed from the Anthropic-style provider: Messages events as OpenAI chunks =="
curl -sS -N -D - "http://127.0.0.1:$PORT/v1/chat/completions" \
  -H 'Content-Type: application/json' \
  -d '{"model":"mixed-chat","stream":true,"stream_options":{"include_usage":true},"max_tokens":6,"route":{"order":["anthropic-sim"],"hedge":false},"messages":[{"role":"user","content":"Say hello"}]}'
echo "== mixed-chat from the Gemini-style provider: a generateContent answer as a chat.completion =="
curl -sS -D - "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"mixed-chat","max_tokens":12,"route":{"order":["gemini-sim"],"hedge":false},"messages":[{"role":"user","content":"Say hello"}]}' \
  | grep -i -E '^x-llmgate-(deployment|attempts|ttft-ms)|^\{'
echo
echo "== cloud-chat from Bedrock: a signed Converse request, its event stream as a chat.completion =="
curl -sS -D - "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"cloud-chat","max_tokens":12,"route":{"order":["bedrock-sim"],"hedge":false},"messages":[{"role":"user","content":"Say hello"}]}' \
  | grep -i -E '^x-llmgate-(deployment|attempts|ttft-ms)|^\{'
echo "== cloud-chat from Vertex AI: Gemini with the OAuth token the gateway fetched (and renews) =="
curl -sS -D - "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"cloud-chat","max_tokens":12,"route":{"order":["vertex-sim"],"hedge":false},"messages":[{"role":"user","content":"Say hello"}]}' \
  | grep -i -E '^x-llmgate-(deployment|attempts|ttft-ms)|^\{'
echo
echo "== Twelve requests to fast-chat, nine to mixed-chat (three led by each deployment, so each has"
echo "   live numbers), then the router's live table: mixed-chat is the cross-provider leaderboard =="
for i in $(seq 1 12); do
  curl -sS -o /dev/null "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"fast-chat","max_tokens":16,"messages":[{"role":"user","content":"Say hello"}]}'
done
for provider in groq-sim anthropic-sim gemini-sim; do
  for i in 1 2 3; do
    curl -sS -o /dev/null "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
      -d '{"model":"mixed-chat","max_tokens":16,"route":{"order":["'"$provider"'"]},"messages":[{"role":"user","content":"Say hello"}]}'
  done
done
curl -sS "http://127.0.0.1:$PORT/admin/routes?format=text"
echo "== A per-request override: pin euro-sim, and see why in x-llmgate-route =="
curl -sS -D - -o /dev/null "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"fast-chat","max_tokens":4,"route":{"order":["euro-sim"],"allow_fallbacks":false},"messages":[{"role":"user","content":"hi"}]}' \
  | grep -i '^x-llmgate'
echo
echo "== The Responses API (the default of the Vercel AI SDK, the Agents SDK, LangChain's"
echo "   useResponsesApi), legacy completions and embeddings: the same routing =="
# (Long answers shown in part: cut here, not by a pipe a failing curl would hide in.)
out=$(curl -sS "http://127.0.0.1:$PORT/v1/responses" -H 'Content-Type: application/json' \
  -d '{"model":"fast-chat","max_output_tokens":16,"input":"Say hello"}')
echo "${out:0:400} ..."
curl -sS "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"fast-chat","max_tokens":8,"prompt":"Say hello"}'
echo
out=$(curl -sS "http://127.0.0.1:$PORT/v1/embeddings" -H 'Content-Type: application/json' \
  -d '{"model":"embed","input":"Say hello"}')
echo "${out:0:200} ..."
echo
echo "== Anthropic's Messages API (Claude Code, the Anthropic SDKs): the same models, every protocol =="
curl -sS "http://127.0.0.1:$PORT/v1/messages" -H 'Content-Type: application/json' \
  -d '{"model":"mixed-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}'
echo
echo
echo "== An unknown model: an OpenAI-shaped error =="
curl -sS "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"gpt-nope","messages":[{"role":"user","content":"hi"}]}'
echo

cat <<MSG

Call it yourself, one call per endpoint (/v1/models says which a model serves):
  curl -N http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model":"fast-chat","stream":true,"messages":[{"role":"user","content":"Hello"}]}'
  curl -N http://127.0.0.1:$PORT/v1/responses -H 'Content-Type: application/json' \\
    -d '{"model":"fast-chat","stream":true,"input":"Hello"}'
  curl http://127.0.0.1:$PORT/v1/completions -H 'Content-Type: application/json' \\
    -d '{"model":"fast-chat","prompt":"Hello","max_tokens":16}'
  curl http://127.0.0.1:$PORT/v1/embeddings -H 'Content-Type: application/json' \\
    -d '{"model":"embed","input":"Hello"}'
  curl -N http://127.0.0.1:$PORT/v1/messages -H 'Content-Type: application/json' \\
    -d '{"model":"mixed-chat","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hello"}]}'
  curl http://127.0.0.1:$PORT/v1/models
  curl http://127.0.0.1:$PORT/admin/routes              # the router's live table (JSON)
  curl 'http://127.0.0.1:$PORT/admin/routes?format=text' # ... as a leaderboard
  http://127.0.0.1:$PORT/admin/console                  # ... live, in a browser

With the OpenAI SDK (Node: npm install openai; Python: pip install openai):
  import OpenAI from "openai";
  const client = new OpenAI({ baseURL: "http://127.0.0.1:$PORT/v1", apiKey: "unused" });
  const stream = await client.chat.completions.create({
    model: "fast-chat", stream: true, messages: [{ role: "user", content: "Hello" }] });
  for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta?.content ?? "");

  from openai import OpenAI
  client = OpenAI(base_url="http://127.0.0.1:$PORT/v1", api_key="unused")
  print(client.chat.completions.create(model="fast-chat",
        messages=[{"role": "user", "content": "Hello"}]).choices[0].message.content)

Claude Code (or any Anthropic SDK client) through it:
  ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT ANTHROPIC_API_KEY=unused ANTHROPIC_MODEL=mixed-chat claude

Script a slowdown while it runs and watch traffic move (x-llmgate-deployment, /admin/routes):
  curl -X PUT http://127.0.0.1:${SIM_PORT[groq-sim]}/admin/profiles/default -d '{"ttft_ms": 900}'
  # ... and mixed-chat moves from groq-sim to gemini-sim, an API of another shape:
  curl -N http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model":"mixed-chat","stream":true,"messages":[{"role":"user","content":"Hello"}]}'

Gateway log: $RUN/llmgate.log (one line per request: deployment, attempts, ttft_ms, tps)
MSG

if [ "$SMOKE" = 1 ]; then
  sleep 1; cat "$RUN/llmgate.log"
  # The sample requests above must have been served.
  grep -q "model=fast-chat stream=true .*outcome=success" "$RUN/llmgate.log"
  grep -q "model=eu-chat stream=false .*outcome=success" "$RUN/llmgate.log"
  for operation in responses text_completion embeddings; do
    grep -q "operation=$operation .*outcome=success" "$RUN/llmgate.log"
  done
  grep -q "model=mixed-chat .*api=messages .*outcome=success" "$RUN/llmgate.log"
  # Bedrock answered a signed request, Vertex AI one with a token the gateway fetched.
  for provider in bedrock-sim vertex-sim; do
    grep -q "model=cloud-chat .*deployment=$provider/.*outcome=success" "$RUN/llmgate.log"
  done
  # mixed-chat was served through the Anthropic and the Gemini protocol (the
  # first request each of those sims gets, pinned and unhedged: no draw of
  # chance decides it; groq-sim's 429s could keep it off mixed-chat for a while).
  for provider in anthropic-sim gemini-sim; do
    grep -q "model=mixed-chat .*deployment=$provider/.*outcome=success" "$RUN/llmgate.log"
  done
  exit 0
fi
# Steady background traffic, so the console has live numbers to show: a few
# requests a second to fast-chat (streamed), mixed-chat and cheap-chat.
# LLMGATE_DEMO_TRAFFIC=0 leaves the gateway idle.
if [ "${LLMGATE_DEMO_TRAFFIC:-1}" != 0 ]; then
  traffic() {  # model rate stream
    printf '{"model":"%s","stream":%s,"max_tokens":24,"messages":[{"role":"user","content":"Say hello"}]}' \
      "$1" "$3" >"$RUN/$1.json"
    "$BIN/llmgate-loadgen" --url "http://127.0.0.1:$PORT/v1/chat/completions" --body-file "$RUN/$1.json" \
      --rate "$2" --connections 64 --warmup 0 --duration 86400 --drain 0 --quiet >"$RUN/traffic-$1.log" 2>&1 &
    pids+=($!)
  }
  traffic fast-chat 4 true
  traffic mixed-chat 2 true
  traffic cheap-chat 1 false
  echo "Background traffic: 4 req/s to fast-chat, 2 to mixed-chat, 1 to cheap-chat (LLMGATE_DEMO_TRAFFIC=0: none)."
fi
cat <<MSG

Live routing console (leaderboard, TTFT and speed over the last minutes, failovers, hedges,
why the top route is chosen) — open it in a browser:
  http://127.0.0.1:$PORT/admin/console

MSG
echo "Press Ctrl-C to stop."
tail -n 0 -f "$RUN/llmgate.log" &
pids+=($!)
wait "$gateway_pid"
