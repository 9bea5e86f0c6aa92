'use strict';
// ONNX Runtime over a directory of inputs, one inference per file in name order, PASSES times:
// the peer of `kiln benchmark MODEL -i NAME=DIR` (bench/compare_detection.sh).
//
// usage: node image_stream_ort.js MODEL.onnx --input NAME=DIR [--threads 2] [--passes 3]
//
// One JSON line per pass on stdout: {"runtime":"ort","pass":p,"files":N,"total_ms":..,
// "median_ms":..,"group_ms":[..],"peak_rss_mib":..}. Only f32 .npy files (C order) are read.
const fs = require('fs');
const os = require('os');
const path = require('path');

const CACHE = process.env.KILN_BENCH_CACHE || path.join(os.homedir(), '.cache', 'kiln-bench');

function readF32Npy(file) {
  const buf = fs.readFileSync(file);
  if (buf.readUInt32BE(0) !== 0x934e554d) throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const off = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', off, off + hlen);
  if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header))
    throw new Error(`${file}: only little-endian f32 in C order is read (${header.trim()})`);
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + off + hlen, buf.byteOffset + buf.length));
  return { shape, data };
}

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main() {
  const a = { model: null, input: null, threads: 2, passes: 3 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--input') a.input = argv[++i];
    else if (k === '--threads') a.threads = parseInt(argv[++i], 10);
    else if (k === '--passes') a.passes = parseInt(argv[++i], 10);
    else if (!a.model) a.model = k;
    else throw new Error(`unexpected argument ${k}`);
  }
  if (!a.model || !a.input || !a.input.includes('=')) {
    console.error('usage: node image_stream_ort.js MODEL.onnx --input NAME=DIR [--threads N] [--passes N]');
    process.exit(2);
  }
  const [name, dir] = [a.input.slice(0, a.input.indexOf('=')), a.input.slice(a.input.indexOf('=') + 1)];
  const files = fs.readdirSync(dir).filter(f => f.endsWith('.npy')).sort().map(f => path.join(dir, f));
  if (!files.length) throw new Error(`${dir}: no .npy files`);
  const ort = require(path.join(CACHE, 'node_modules', 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(a.model, {
    intraOpNumThreads: a.threads, interOpNumThreads: 1, graphOptimizationLevel: 'all', executionMode: 'sequential',
  });
  const feeds = files.map(f => {
    const t = readF32Npy(f);
    return { [name]: new ort.Tensor('float32', t.data, t.shape) };
  });
  const r3 = x => Math.round(x * 1000) / 1000;
  for (let p = 1; p <= a.passes; p++) {
    const ms = [];
    for (const feed of feeds) {
      const t = process.hrtime.bigint();
      await session.run(feed);
      ms.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    console.log(JSON.stringify({
      runtime: 'ort', pass: p, files: files.length, total_ms: r3(ms.reduce((x, y) => x + y, 0)),
      median_ms: r3(median(ms)), group_ms: ms.map(r3),
      peak_rss_mib: Math.round(process.resourceUsage().maxRSS / 1024 * 10) / 10,
    }));
  }
}

main().catch(e => { console.error(`image_stream_ort: ${e.message}`); process.exit(1); });
