#!/usr/bin/env node
'use strict';
// ONNX Runtime (CPU EP, onnxruntime-node) timing of a variable-shape stream: one session, and
// inferences whose input shapes change every run (a model exported with dynamic axes, e.g. by
// make_dynamic_models.py).
//
// usage: node bench/dynamic_stream_ort.js MODEL.onnx --shapes SPEC [--threads 2] [--passes 3]
//                                         [--dump DIR]
//        node bench/dynamic_stream_ort.js --gen STREAM        (prints the stream's SPEC)
//        node bench/dynamic_stream_ort.js --model-of STREAM   (prints the name of its model in the
//                                                              bench cache, make_dynamic_models.py)
//
// The streams (this file is their one list; compare_dynamic.sh and verify_streams.py ask it):
//   crnn        crnn_dyn, x [1, 3, 48, W], W = 96, 120, ..., 1608
//   bert        bert6_dyn, [1, L], L = 8, 10, ..., 134
//   bert-batch  bert6_dyn, [B, L], B = 1, 2, 4, 8 in turn, L as bert
//   mnv2-batch  mnv2_dyn, [B, 3, H, W], B = 1, 2, 4, 8 in turn, H = 160-256, W = H + 0-96
//   NAME-hw     NAME_hw (mnv3s, effb0, regnet, resnext, deeplab, densenet, googlenet, squeezenet), 12 images
//               [1 + i % 2, 3, 160 + 8i, 248 - 8i]
//   NAME-hw60   the same network, 60 images two pixels apart
//   (hw, hw60: the image shapes alone, for --gen)
//
// SPEC is benchmark_app's data_shape syntax: `x[1,3,48,96][1,3,48,120]`, or for several inputs
// `input_ids[1,8][1,12],attention_mask[1,8][1,12]`; the i-th shape of every input makes the i-th
// group (an input given a single shape keeps it in every group).
// A pass runs every group once, in order; one JSON line per pass on stdout:
//   {"runtime":"ort","pass":p,"shapes":N,"total_ms":..,"median_ms":..,"rss_mib":..,"peak_rss_mib":..,
//    "min_ms":..,"max_ms":..,"threads":..,"group_ms":[..]}
// group_ms holds each group's latency in order; total_ms is the sum of the N session.run() latencies (input generation is not timed), median
// over the N runs; rss from process.memoryUsage().rss after the pass, peak from
// process.resourceUsage().maxRSS.  Pass 1 is cold: nothing runs before it.
// Inputs (the same in every pass): float -> uniform [-1, 1) from a fixed-seed generator; int64
// whose name contains "mask" -> ones with the last 25% of positions (last axis) zero; other int64
// whose name contains "type" -> zeros; other int64 (input_ids) -> uniform in [0, 30000).
// --dump DIR writes, for the first pass, DIR/<group>_in_<name>.npy and DIR/<group>_out_<name>.npy
// (make_dynamic_models.py compares them with torch).
// Session: intraOpNumThreads = --threads, interOpNumThreads 1, graphOptimizationLevel 'all',
// executionMode 'sequential'.
const fs = require('fs');
const os = require('os');
const path = require('path');

const CACHE = process.env.KILN_BENCH_CACHE || path.join(os.homedir(), '.cache', 'kiln-bench');

function usage(code) {
  const lines = fs.readFileSync(__filename, 'utf8').split('\n').slice(2);
  const end = lines.findIndex(l => !l.startsWith('//'));
  console.error(lines.slice(0, end).map(l => l.replace(/^\/\/ ?/, '')).join('\n'));
  process.exit(code);
}

// --- shape specs ----------------------------------------------------------------------------

const STREAMS = 'crnn, bert, bert-batch, mnv2-batch, NAME-hw, NAME-hw60';  // for the errors

// A stream's model (its directory in the bench cache) and its shapes' kind, or null.
function streamOf(stream) {
  const fixed = { crnn: 'crnn_dyn', bert: 'bert6_dyn', 'bert-batch': 'bert6_dyn', 'mnv2-batch': 'mnv2_dyn' };
  if (fixed[stream]) return { model: fixed[stream], kind: stream };
  const m = /^(.+)-(hw|hw60)$/.exec(stream);
  return m ? { model: `${m[1]}_hw`, kind: m[2] } : null;
}

function genSpec(stream) {
  const named = streamOf(stream);
  const kind = named ? named.kind : stream;
  const n = 64;
  const fmt = (name, shapes) => name + shapes.map(s => `[${s.join(',')}]`).join('');
  const idx = [...Array(n).keys()];
  if (kind === 'crnn') return fmt('x', idx.map(i => [1, 3, 48, 96 + 24 * i]));
  if (kind === 'bert' || kind === 'bert-batch') {
    const shapes = idx.map(i => [kind === 'bert' ? 1 : [1, 2, 4, 8][i % 4], 8 + 2 * i]);
    return `${fmt('input_ids', shapes)},${fmt('attention_mask', shapes)}`;
  }
  if (kind === 'mnv2-batch')  // batches 1-8 x heights 160-256 x widths height + 0-96 (every group distinct)
    return fmt('x', idx.map(i => { const h = 160 + 32 * ((i >> 2) % 4); return [[1, 2, 4, 8][i % 4], 3, h, h + 32 * (i >> 4)]; }));
  // images of every aspect: batch 1 and 2 alternating, height up and width down by a step
  // (make_dynamic_models.py's *_hw networks): 12 groups 8 pixels apart, or 60 groups 2 apart
  if (kind === 'hw') return fmt('x', [...Array(12).keys()].map(i => [1 + i % 2, 3, 160 + 8 * i, 248 - 8 * i]));
  if (kind === 'hw60') return fmt('x', [...Array(60).keys()].map(i => [1 + i % 2, 3, 160 + 2 * i, 248 - 2 * i]));
  throw new Error(`--gen: unknown stream ${stream} (${STREAMS}, or the image shapes alone: hw, hw60)`);
}

// 'a[1,2][3,4],b[5]' -> [{a: [1,2], b: [5]}, {a: [3,4], b: [5]}]
function parseSpec(spec) {
  const inputs = [];
  const re = /\s*([^,\[\]\s][^,\[\]]*?)\s*((?:\[[^\]]*\]\s*)+)\s*(?:,|$)/y;
  let m;
  while (re.lastIndex < spec.length && (m = re.exec(spec)) !== null) {
    const shapes = [...m[2].matchAll(/\[([^\]]*)\]/g)].map(s => s[1].trim() === '' ? [] : s[1].split(',').map(d => {
      const v = Number(d.trim());
      if (!Number.isInteger(v) || v < 0) throw new Error(`bad dim '${d}' in --shapes`);
      return v;
    }));
    inputs.push({ name: m[1], shapes });
  }
  if (!inputs.length || re.lastIndex !== spec.length) throw new Error(`cannot parse --shapes '${spec}' (expected name[d,d][d,d],name[..])`);
  const n = Math.max(...inputs.map(i => i.shapes.length));
  for (const i of inputs) {
    if (i.shapes.length !== n && i.shapes.length !== 1) throw new Error(`--shapes: ${i.name} has ${i.shapes.length} shapes, others ${n}`);
  }
  return [...Array(n).keys()].map(g => Object.fromEntries(inputs.map(i => [i.name, i.shapes[i.shapes.length === 1 ? 0 : g]])));
}

// --- inputs ---------------------------------------------------------------------------------

function rng(seed) {            // mulberry32: uniform [0, 1)
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6D2B79F5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function makeTensor(ort, name, type, dims, seed) {
  const n = dims.reduce((a, b) => a * b, 1);
  const rnd = rng(seed);
  const last = dims.length ? dims[dims.length - 1] : 1;
  switch (type) {
    case 'float32': case 'float': {
      const d = new Float32Array(n);
      for (let i = 0; i < n; i++) d[i] = rnd() * 2 - 1;
      return new ort.Tensor('float32', d, dims);
    }
    case 'int64': case 'int32': {
      const d = type === 'int64' ? new BigInt64Array(n) : new Int32Array(n);
      const cast = type === 'int64' ? BigInt : Number;
      const lname = name.toLowerCase();
      const valid = last - Math.floor(last / 4);
      for (let i = 0; i < n; i++) {
        let v;
        if (lname.includes('mask')) v = (i % last) < valid ? 1 : 0;
        else if (lname.includes('type')) v = 0;
        else v = Math.floor(rnd() * 30000);
        d[i] = cast(v);
      }
      return new ort.Tensor(type, d, dims);
    }
    default: throw new Error(`input ${name}: no generator for type ${type}`);
  }
}

// --- npy (for --dump) -----------------------------------------------------------------------

function writeNpy(file, tensor) {
  const descr = { float32: '<f4', int64: '<i8', int32: '<i4', float64: '<f8', uint8: '|u1', bool: '|b1' }[tensor.type];
  if (!descr) throw new Error(`--dump: cannot write type ${tensor.type}`);
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0; pre.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'),
    Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

// --- main -----------------------------------------------------------------------------------

function parseArgs(argv) {
  const a = { model: null, shapes: null, threads: 2, passes: 3, dump: null, gen: null, modelOf: null };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => { if (i + 1 >= argv.length) throw new Error(`${k} needs a value`); return argv[++i]; };
    if (k === '--shapes') a.shapes = v();
    else if (k === '--threads') a.threads = parseInt(v(), 10);
    else if (k === '--passes') a.passes = parseInt(v(), 10);
    else if (k === '--dump') a.dump = v();
    else if (k === '--gen') a.gen = v();
    else if (k === '--model-of') a.modelOf = v();
    else if (k === '-h' || k === '--help') usage(0);
    else if (!a.model && !k.startsWith('--')) a.model = k;
    else throw new Error(`unexpected argument ${k}`);
  }
  if (!a.gen && !a.modelOf && (!a.model || !a.shapes)) usage(2);
  if (!(a.threads >= 1) || !(a.passes >= 1)) throw new Error('--threads and --passes must be >= 1');
  return a;
}

const r3 = x => Math.round(x * 1000) / 1000;
const mib = bytes => Math.round(bytes / 1048576 * 10) / 10;

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  if (a.gen) { console.log(genSpec(a.gen)); return; }
  if (a.modelOf) {
    const named = streamOf(a.modelOf);
    if (!named) throw new Error(`--model-of: unknown stream ${a.modelOf} (${STREAMS})`);
    console.log(named.model);
    return;
  }
  const groups = parseSpec(a.shapes);

  const ort = require(path.join(CACHE, 'node_modules', 'onnxruntime-node'));
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, {
    intraOpNumThreads: a.threads, interOpNumThreads: 1,
    graphOptimizationLevel: 'all', executionMode: 'sequential',
  });
  const sessionMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const types = Object.fromEntries((session.inputMetadata || []).map(m => [m.name, m.isTensor ? m.type : null]));
  for (const name of session.inputNames) {
    if (!(name in groups[0])) throw new Error(`--shapes gives no shape for model input ${name}`);
  }
  for (const name of Object.keys(groups[0])) {
    if (!session.inputNames.includes(name)) throw new Error(`--shapes names ${name}, not an input of the model (${session.inputNames.join(', ')})`);
  }
  console.error(`# ${path.basename(path.dirname(a.model))}/${path.basename(a.model)}: ${groups.length} shape groups, ` +
                `${a.threads} threads, session created in ${sessionMs.toFixed(0)} ms`);
  if (a.dump) fs.mkdirSync(a.dump, { recursive: true });

  for (let p = 1; p <= a.passes; p++) {
    const ms = [];
    for (let g = 0; g < groups.length; g++) {
      const feeds = {};
      session.inputNames.forEach((name, k) => {
        const type = types[name] || (/ids|mask/i.test(name) ? 'int64' : 'float32');
        feeds[name] = makeTensor(ort, name, type, groups[g][name], 1000003 * (g + 1) + 7919 * k);
      });
      const t = process.hrtime.bigint();
      const out = await session.run(feeds);
      ms.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (a.dump && p === 1) {
        for (const [name, tensor] of Object.entries(feeds)) writeNpy(path.join(a.dump, `${g}_in_${name}.npy`), tensor);
        for (const [name, tensor] of Object.entries(out)) writeNpy(path.join(a.dump, `${g}_out_${name}.npy`), tensor);
      }
    }
    console.log(JSON.stringify({
      runtime: 'ort', pass: p, shapes: groups.length,
      total_ms: r3(ms.reduce((x, y) => x + y, 0)), median_ms: r3(median(ms)),
      rss_mib: mib(process.memoryUsage().rss), peak_rss_mib: mib(process.resourceUsage().maxRSS * 1024),
      min_ms: r3(Math.min(...ms)), max_ms: r3(Math.max(...ms)), threads: a.threads,
      group_ms: ms.map(r3),
    }));
  }
}

main().catch(e => { console.error(`dynamic_stream_ort: ${e.message}`); process.exit(1); });
