#!/usr/bin/env node
'use strict';
// Runs one model on ONNX Runtime (onnxruntime-node, CPU) for make_cases.py: the reference
// outputs of kiln's own opset 18-23 cases.
//
// usage: node ort_run.js MODEL.onnx IN.json OUT.json [--opt disabled|basic|extended|all] [--iters N]
// (default: optimizations disabled, one run; with --iters N > 1 it also prints
// {"median_ms": ...} of N runs after the first, on 1 thread)
// IN.json / OUT.json: {name: {"type": ORT type, "dims": [...], "b64": raw little-endian bytes}}
// (string tensors: "strings": [...] instead of "b64"). Exit 3 with the message on stderr
// when ORT rejects the model or the inputs.
const fs = require('fs');
const path = require('path');

const CACHE = process.env.KILN_BENCH_CACHE || path.join(require('os').homedir(), '.cache', 'kiln-bench');
let ort;
try {
  ort = require(path.join(CACHE, 'node_modules', 'onnxruntime-node'));
} catch (e) {
  ort = require('onnxruntime-node');
}

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array,
  uint64: BigUint64Array, bool: Uint8Array,
};

function toTensor(spec) {
  if (spec.strings) return new ort.Tensor('string', spec.strings, spec.dims);
  const raw = Buffer.from(spec.b64, 'base64');
  const Ctor = ARRAYS[spec.type];
  const copy = new Uint8Array(raw.length);
  copy.set(raw);
  const data = new Ctor(copy.buffer, 0, raw.length / Ctor.BYTES_PER_ELEMENT);
  return new ort.Tensor(spec.type, spec.type === 'bool' ? Uint8Array.from(data) : data, spec.dims);
}

function fromTensor(t) {
  if (t.type === 'string') return { type: 'string', dims: t.dims, strings: Array.from(t.data) };
  const d = t.data;
  return { type: t.type, dims: t.dims, b64: Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('base64') };
}

async function main() {
  const [model, inFile, outFile, ...rest] = process.argv.slice(2);
  let opt = 'disabled';
  let iters = 1;
  for (let i = 0; i < rest.length; i += 2) {
    if (rest[i] === '--opt') opt = rest[i + 1];
    else if (rest[i] === '--iters') iters = parseInt(rest[i + 1], 10);
    else throw new Error(`unknown argument ${rest[i]}`);
  }
  const specs = JSON.parse(fs.readFileSync(inFile, 'utf8'));
  const feeds = {};
  for (const [k, v] of Object.entries(specs)) feeds[k] = toTensor(v);
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1,
                                                             graphOptimizationLevel: opt });
  const res = await session.run(feeds);
  if (iters > 1) {
    const times = [];
    for (let i = 1; i < iters; i++) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(JSON.stringify({ median_ms: times[Math.floor(times.length / 2)] }));
  }
  const out = {};
  for (const name of session.outputNames) out[name] = fromTensor(res[name]);
  fs.writeFileSync(outFile, JSON.stringify(out));
}

main().catch((e) => {
  console.error(String(e && e.message ? e.message : e));
  process.exit(3);
});
