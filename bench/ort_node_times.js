'use strict';
// ONNX Runtime's own per-node times: its profiler over ITERS inferences of one input set, the
// peer of `kiln benchmark MODEL --trace FILE`. bench/node_times.py puts the two side by side.
//
// usage: node ort_node_times.js MODEL.onnx --out PROFILE.json [--inputs DIR] [--threads 2] [--iters 30]
//
// DIR holds <input name>.npy for every input (default: MODEL's directory's inputs/, as
// ../shared/bench writes it). The profile is ORT's Chrome-trace JSON, moved to PROFILE.json.
const fs = require('fs');
const os = require('os');
const path = require('path');

const CACHE = process.env.KILN_BENCH_CACHE || path.join(os.homedir(), '.cache', 'kiln-bench');
const SHARED = path.join(__dirname, '..', '..', 'shared', 'bench');

function usage(code) {
  console.error('usage: node ort_node_times.js MODEL.onnx --out PROFILE.json [--inputs DIR] [--threads 2] [--iters 30]');
  process.exit(code);
}

async function main() {
  const a = { model: null, out: null, inputs: null, threads: 2, iters: 30 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--out') a.out = argv[++i];
    else if (k === '--inputs') a.inputs = argv[++i];
    else if (k === '--threads') a.threads = parseInt(argv[++i], 10);
    else if (k === '--iters') a.iters = parseInt(argv[++i], 10);
    else if (k === '-h' || k === '--help') usage(0);
    else if (!a.model) a.model = k;
    else usage(2);
  }
  if (!a.model || !a.out || !(a.threads > 0) || !(a.iters > 0)) usage(2);
  const ort = require(path.join(CACHE, 'node_modules', 'onnxruntime-node'));
  const { readNpyDir } = require(path.join(SHARED, 'npy'));
  const inputs = a.inputs || path.join(path.dirname(path.resolve(a.model)), 'inputs');
  if (!fs.existsSync(inputs)) throw new Error(`no inputs: ${inputs} (give --inputs DIR of <name>.npy)`);
  const prefix = path.join(os.tmpdir(), `ort_node_times_${process.pid}`);
  const session = await ort.InferenceSession.create(path.resolve(a.model), {
    executionProviders: ['cpu'], intraOpNumThreads: a.threads, interOpNumThreads: 1,
    executionMode: 'sequential', logSeverityLevel: 3, enableProfiling: true, profileFilePrefix: prefix,
  });
  const arrs = readNpyDir(inputs);
  const feeds = {};
  for (const name of session.inputNames) {
    if (!arrs[name]) throw new Error(`input ${name} not found in ${inputs}`);
    feeds[name] = new ort.Tensor(arrs[name].type, arrs[name].data, arrs[name].shape);
  }
  for (let i = 0; i < a.iters; i++) await session.run(feeds);
  session.endProfiling();
  const dir = path.dirname(prefix);
  const written = fs.readdirSync(dir).filter(f => f.startsWith(path.basename(prefix)) && f.endsWith('.json'));
  if (written.length !== 1) throw new Error(`expected one profile from ORT in ${dir}, found ${written.length}`);
  fs.copyFileSync(path.join(dir, written[0]), a.out);
  fs.unlinkSync(path.join(dir, written[0]));
  console.log(`${a.out}: ${a.iters} inferences profiled`);
}

main().catch(e => { console.error(String(e && e.stack || e)); process.exit(1); });
