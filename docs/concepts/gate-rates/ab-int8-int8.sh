#!/bin/bash
# Two kvlab serve int8 servers started once; kvlab ab trials against them (external modes)
set -u
cd /tmp/ab-measure/tree
OUT=/tmp/ab-measure/out
pids=()
for port in 18341 18342; do
  echo "\$ kvlab serve -m gemma-3-270m --dtype int8 --threads 1 --slots 8 -c 256 --port $port &"
  kvlab serve -m gemma-3-270m --dtype int8 --threads 1 --slots 8 -c 256 --port $port > /tmp/ab-measure/serve-$port.log 2>&1 &
  pids+=($!)
done
for port in 18341 18342; do
  for i in $(seq 1 240); do curl -sf http://127.0.0.1:$port/health >/dev/null && break; sleep 1; done
done
model=$(curl -s http://127.0.0.1:18341/v1/models | python -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
echo "model id: $model"
python - "$model" <<'PY'
import sys, tomllib
from pathlib import Path
model = sys.argv[1]
src = Path("experiments/engine-serving.toml").read_text()
data = tomllib.loads(src)
head = src.split("[[modes]]")[0]
head = head.replace('compare = [["vllm", "kvlab-int8"], ["llama-server", "kvlab-int8"], ["kvlab-float32", "kvlab-int8"]]\n', '')
head = head.replace('name = "engine-serving"', 'name = "engine-serving-attached"')
modes = "".join(f'''
[[modes]]
name = "{name}"
server = "external"
api = "openai-completion"
[modes.external]
base_url = "http://127.0.0.1:{port}/v1"
model = "{model}"
''' for name, port in (("int8-one", 18341), ("int8-two", 18342)))
Path("/tmp/ab-measure/int8-attached.toml").write_text(head + modes)
PY
python tools/ab_trials.py --trials 20 --runs /tmp/ab-measure/ab-runs --stop-at $(date -d '19:06' +%s) \
  --out $OUT/ab-int8-int8.json -- /tmp/ab-measure/int8-attached.toml \
  --a int8-one --b int8-two --metric itl_effective_ms --block 2 --max-rows 32
for p in "${pids[@]}"; do kill $p; done
wait
